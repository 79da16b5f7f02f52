"""How a setting names the environment variables it is read from."""

from __future__ import annotations

from pydantic import AliasChoices


def env(name: str, *more: str) -> AliasChoices:
    """The variable `name` (and older names in `more`): pydantic's alias choices, so a setting
    is read from the environment under that name and never under its Python field name."""
    return AliasChoices(name, *more)
