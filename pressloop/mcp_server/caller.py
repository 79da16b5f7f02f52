"""Who is calling over MCP: a token's name and role (HTTP), or the local user (stdio).

The roles are the API's: admin (everything) > operator (chat, act) > viewer (read). Over MCP an
approval needs an admin: an agent connected with an operator token must not approve its own
calls.
"""

from __future__ import annotations

from dataclasses import dataclass

RANK = {"viewer": 0, "operator": 1, "admin": 2}


@dataclass(frozen=True, kw_only=True)
class Caller:
    name: str  # the user the runs it starts are recorded for
    role: str

    def has(self, role: str) -> bool:
        return RANK.get(self.role, -1) >= RANK[role]

    def refusal(self, role: str, what: str) -> str | None:
        """Why this caller may not do `what` (None: it may)."""
        if self.has(role):
            return None
        return f"{what} needs an {role} token; {self.name!r} is {self.role}"
