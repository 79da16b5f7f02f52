"""The action registry: what an action is (name, params model, risk) and how it runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

from pressloop.contracts import ActionContext, CatalogEntry, Risk

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

    async def remember(self, agent_id: str, content: str, tags: list[str]) -> int: ...

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
    extra: dict[str, Any] = field(default_factory=dict)


Handler = Callable[[Any, ActionContext, ActionServices], Awaitable[ActionResult]]
# Did an earlier, interrupted attempt of this step take effect? The result if so, else None.
Reconciler = Callable[[Any, ActionContext, ActionServices], Awaitable[ActionResult | None]]
# What an approver sees before deciding: e.g. the fields before and after an update.
Previewer = Callable[[Any, ActionContext, ActionServices], Awaitable[Any]]
# What undo needs, read before the action runs (kept in the ledger with the step's intent).
Snapshotter = Callable[[Any, ActionContext, ActionServices], Awaitable[Any]]
# Reverses a done step from its snapshot and the data the action returned.
Undoer = Callable[[Any, Any, ActionServices], Awaitable[ActionResult]]


@dataclass(kw_only=True, frozen=True)
class ActionSpec:
    name: str
    description: str
    params: type[BaseModel]
    risk: Risk
    handler: Handler
    network: bool = False
    reconcile: Reconciler | None = None
    preview: Previewer | None = None
    snapshot: Snapshotter | None = None
    undo: Undoer | None = None

    def entry(self) -> CatalogEntry:
        return CatalogEntry(
            name=self.name,
            description=self.description,
            risk=self.risk,
            params_schema=self.params.model_json_schema(),
            network=self.network,
        )


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

    def get(self, name: str) -> ActionSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def catalog(self) -> list[CatalogEntry]:
        # Built once: JSON schemas are costly to make and every model call needs them.
        if self._catalog is None:
            self._catalog = [self._specs[name].entry() for name in self.names()]
        return self._catalog
