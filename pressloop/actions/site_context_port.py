"""The SITE_CONTEXT port: what every prompt says about the site the actions work on.

A pack with a site behind it (the WordPress pack) supplies the source and the runtime wires it
in (`runtime/wiring.py`). The runner asks it for the text of each turn's SITE_CONTEXT section,
and invalidates it after a turn in which an action that changes what it describes succeeded
(`ActionSpec.changes_site_context`), so the next turn reads the site again.
"""

from __future__ import annotations

from typing import Protocol


class SiteContextSource(Protocol):
    async def text(self) -> str:
        """The SITE_CONTEXT text (a source may cache it); never raises for an unreachable
        site: the text says why the site could not be read, and the turn goes on."""
        ...

    def invalidate(self) -> None:
        """What the text describes changed: read it again next time."""
        ...
