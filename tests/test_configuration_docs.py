"""Every setting `pressloop/config/` reads is documented in docs/configuration.md (issue 14,
finding 12): each environment variable is named, in full, in the first column of a table row."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices

from pressloop.config import Settings

DOC = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def env_names() -> set[str]:
    names: set[str] = set()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        assert isinstance(alias, AliasChoices), f"{name}: read from no environment variable"
        names |= {choice for choice in alias.choices if isinstance(choice, str)}
    return names


def documented() -> set[str]:
    """The variables named in the first column of the document's table rows."""
    rows = (line for line in DOC.read_text(encoding="utf-8").splitlines() if line.startswith("|"))
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split("|")[1])}


def test_every_setting_is_documented() -> None:
    missing = sorted(env_names() - documented())
    assert not missing, f"add these to docs/configuration.md: {', '.join(missing)}"


def test_the_document_names_no_setting_that_does_not_exist() -> None:
    unknown = sorted(n for n in documented() - env_names() if n.startswith("PRESSLOOP_"))
    assert not unknown, f"docs/configuration.md names settings no Settings field reads: {unknown}"
