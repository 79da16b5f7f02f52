"""The action registry: what an action is (name, params model, risk) and how it runs.

Beside its risk, an action declares what the untrusted-content guard needs (DESIGN.md section 3):
- `untrusted_output`: its results carry text someone other than the owner can write (posts,
  comments, users' names, media text, plugin data, settings, web pages); the model receives them
  marked, and while they are in its history the turn is tainted. A handler may also mark one
  result (`ActionResult.untrusted`).
- `sensitive`: granting or changing access, who can reach the site, plugins, memory, spawning: in
  a tainted turn it needs a person's approval whatever the policy says, like a destructive one.
  A bool, or a function of the params (and services) when only some calls are. Network actions
  (`network=True`) are sensitive unless their URL's host is one the owner allowed.
- `changes_site_context`: once it succeeds, the SITE_CONTEXT the prompts carry is stale (plugins,
  themes, settings): the pack's `SiteContextSource` is invalidated after the turn.
- secret params: a field declared with `json_schema_extra=SECRET_FIELD` (passwords) is never
  stored, shown or logged (`pressloop.redaction`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pressloop.actions.outbound import FetchOptions, reaches_unallowed_host
from pressloop.clock import Now, utc_now
from pressloop.contracts import ActionContext, CatalogEntry, Risk
from pressloop.redaction import secret_fields

if TYPE_CHECKING:
    from pressloop.actions.wordpress.client import WordPressClient


@dataclass(kw_only=True)
class ActionResult:
    """What a handler returns: `content` is shown to the model (JSON if not a string)."""

    content: Any
    summary: str
    untrusted: bool = False


class MemoryPort(Protocol):
    """Where memories live; the runtime hands in the database-backed one."""

    async def remember(
        self, agent_id: str, content: str, tags: list[str], *, untrusted: bool = False
    ) -> int: ...

    async def recall(self, agent_id: str, query: str, limit: int) -> list[dict[str, Any]]: ...

    async def forget(self, agent_id: str, ids: list[int]) -> int: ...


class SpawnPort(Protocol):
    """Starts a child agent on a new thread; the runtime hands in the database-backed one."""

    async def spawn(
        self, context: ActionContext, *, message: str, wait: bool, title: str, key: str
    ) -> dict[str, Any]: ...


@dataclass(kw_only=True)
class ActionServices:
    """The outside things handlers may use; each is optional so packs can be tested alone."""

    memory: MemoryPort | None = None
    spawner: SpawnPort | None = None
    wordpress: WordPressClient | None = None
    now: Now = utc_now  # e.g. how recent a reconciled step's look-alike post must be
    web: FetchOptions = field(default_factory=FetchOptions)  # web_fetch, upload_media


Handler = Callable[[Any, ActionContext, ActionServices], Awaitable[ActionResult]]
# Did an earlier, interrupted attempt of this step take effect? The result if so, else None.
Reconciler = Callable[[Any, ActionContext, ActionServices], Awaitable[ActionResult | None]]
# What an approver sees before deciding: e.g. the fields before and after an update.
Previewer = Callable[[Any, ActionContext, ActionServices], Awaitable[Any]]
# What undo needs, read before the action runs (kept in the ledger with the step's intent).
Snapshotter = Callable[[Any, ActionContext, ActionServices], Awaitable[Any]]
# Reverses a done step from its snapshot and the data the action returned.
Undoer = Callable[[Any, Any, ActionServices], Awaitable[ActionResult]]
# Whether this call (its validated params) is sensitive.
Sensitivity = Callable[[Any, ActionServices], bool]


@dataclass(kw_only=True, frozen=True)
class ActionSpec:
    name: str
    description: str
    params: type[BaseModel]
    risk: Risk
    handler: Handler
    network: bool = False
    untrusted_output: bool = False
    sensitive: bool | Sensitivity = False
    changes_site_context: bool = False
    # The outside MCP server whose tool this is (None: Pressloop's own action).
    server: str | None = None
    # Running it twice does what running it once does: a step interrupted with no way to look
    # (no `reconcile`) is run again instead of being reported as of unknown outcome.
    idempotent: bool = False
    reconcile: Reconciler | None = None
    preview: Previewer | None = None
    snapshot: Snapshotter | None = None
    undo: Undoer | None = None

    def entry(self) -> CatalogEntry:
        schema = self.params.model_json_schema()
        return CatalogEntry(
            name=self.name,
            description=self.description,
            risk=self.risk,
            params_schema=schema,
            network=self.network,
            secret_params=secret_fields(schema),
            server=self.server,
        )

    def secret_params(self) -> list[str]:
        return [
            name
            for name, info in self.params.model_fields.items()
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("secret")
        ]

    def is_sensitive(self, params: Any, services: ActionServices) -> bool:
        if callable(self.sensitive):
            return self.sensitive(params, services)
        if self.sensitive:
            return True
        if self.network:
            return reaches_unallowed_host(params, services)
        return False


class Registry:
    def __init__(self, specs: Iterable[ActionSpec] = ()) -> None:
        self._specs: dict[str, ActionSpec] = {}
        self._catalog: list[CatalogEntry] | None = None
        for spec in specs:
            self.register(spec)

    def register(self, spec: ActionSpec) -> None:
        if spec.name in self._specs:
            raise ValueError(f"action {spec.name!r} is registered twice")
        self._specs[spec.name] = spec
        self._catalog = None

    def replace_server(self, server: str, specs: Iterable[ActionSpec]) -> None:
        """An MCP server's tools now: those it had go, these come (none: it is gone)."""
        for name in [n for n, spec in self._specs.items() if spec.server == server]:
            del self._specs[name]
        self._catalog = None
        for spec in specs:
            if spec.server != server:
                raise ValueError(f"action {spec.name!r} is not a tool of {server!r}")
            self.register(spec)

    def servers(self) -> set[str]:
        return {spec.server for spec in self._specs.values() if spec.server is not None}

    def get(self, name: str) -> ActionSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def catalog(self) -> list[CatalogEntry]:
        # Built once: JSON schemas are costly to make and every model call needs them.
        if self._catalog is None:
            self._catalog = [self._specs[name].entry() for name in self.names()]
        return self._catalog
