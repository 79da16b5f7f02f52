"""The service: one object that the API, the CLI and the worker share.

It owns the database, the provider, the action registry and the runner, starts this process's
worker, event listener and scheduler, and closes it all. What people do with it comes from its
parts: the commands on runs (`service_runs.py`: submit a message, spawn, decide, cancel,
requeue), the reads (`service_reads.py`, `overview_reads.py`: wait for or stream a run) and the
admin's settings (`service_admin.py`). Chat, API and background runs all go through `submit`
and the same runner.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable
from typing import Any

from pressloop.actions.registry import ActionSpec, Registry
from pressloop.clock import Now, utc_now
from pressloop.config import Settings
from pressloop.observability.metrics import Metrics
from pressloop.providers.base import Provider
from pressloop.runtime.approvals import Approvals
from pressloop.runtime.bus import EventBus
from pressloop.runtime.heartbeat_runs import Scheduler
from pressloop.runtime.heartbeat_schedules import Schedules
from pressloop.runtime.mcp_tools import McpTools
from pressloop.runtime.observed import metrics_from
from pressloop.runtime.overview_reads import OverviewReads
from pressloop.runtime.runner import Runner
from pressloop.runtime.service_admin import ServiceAdmin
from pressloop.runtime.service_runs import ServiceRuns
from pressloop.runtime.spawn import Spawner
from pressloop.runtime.stream_relays import StreamRelays
from pressloop.runtime.undo import Undo
from pressloop.runtime.wiring import cached_provider, default_actions, wire_actions
from pressloop.runtime.worker import Worker
from pressloop.store import agents as agent_store
from pressloop.store import migrate
from pressloop.store.db import Database
from pressloop.store.notify import CHANNEL as EVENTS_CHANNEL
from pressloop.store.notify import RUNS_CHANNEL, Listener

log = logging.getLogger(__name__)


def default_owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


class Service(ServiceRuns, OverviewReads, ServiceAdmin):
    def __init__(
        self,
        *,
        settings: Settings,
        database: Database,
        provider: Callable[[], Provider],
        actions: list[ActionSpec] | None = None,
        now: Now = utc_now,
        owner: str | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        # This process's metrics (pressloop/observability/), served by `pressloop serve` and
        # by a worker's PRESSLOOP_METRICS_PORT.
        self.metrics = metrics or metrics_from(settings)
        self.database = database
        self.now = now
        self.bus = EventBus()
        self.registry = Registry(
            actions
            if actions is not None
            else default_actions(settings.action_packs, wordpress=bool(settings.wp_url))
        )
        # The actions' services and the site's pack, from Settings (closed with the service).
        self.wiring = wire_actions(settings, database, now)
        # The outside MCP servers' tools, brought into the registry before each turn.
        self.mcp_tools = McpTools(settings, database, self.registry)
        self.runner = Runner(
            database=database,
            settings=settings,
            registry=self.registry,
            bus=self.bus,
            provider=provider,
            owner=owner or default_owner(),
            services=self.wiring.services,
            site_context=self.wiring.site_context,
            on_queued=self._queued,
            outside_tools=self.mcp_tools.refresh,
            now=now,
            metrics=self.metrics,
            relays=StreamRelays(settings.streamer_relay.get_secret_value(), self.bus),
        )
        self.metrics.know_actions(lambda name: self.registry.get(name) is not None)
        self._provider = provider
        self._tasks: set[asyncio.Task[Any]] = set()
        # Whether this process runs turns a request starts (`submit(start_here=True)`, a
        # decided approval, a requeue): `pressloop serve` with PRESSLOOP_SERVE_RUNS=0 does not.
        self.runs_turns = True
        self.worker: Worker | None = None
        self.listener: Listener | None = None
        self.scheduler: Scheduler | None = None
        self.schedules = Schedules(database, now)
        self.approvals = Approvals(database, now, self.registry)
        self.spawner = Spawner(database, now, max_attempts=settings.max_attempts)
        self.undoer = Undo(database, self.registry, self.wiring.services, now)

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        provider: Callable[[], Provider] | None = None,
        upgrade: bool = True,
        **kwargs: Any,
    ) -> Service:
        database = Database.open(
            settings.resolved_database_url(),
            idle_transaction_timeout_s=max(1.0, settings.lease_ttl_s),
            pool_size=settings.resolved_db_pool_size(),
            max_overflow=settings.db_max_overflow,
            pool_timeout_s=settings.db_pool_timeout_s,
            busy_timeout_s=settings.db_busy_timeout_s,
        )
        if upgrade:
            await migrate.upgrade(database)
        service = cls(
            settings=settings,
            database=database,
            provider=provider or cached_provider(settings),
            **kwargs,
        )
        async with database.write() as conn:
            await agent_store.ensure_agent(conn, now=service.now())
        return service

    def start_worker(self, concurrency: int | None = None) -> Worker:
        """Run a worker inside this process (what `pressloop serve` does)."""
        self.worker = Worker(
            self.runner,
            concurrency=concurrency or self.settings.worker_concurrency,
            poll_s=self.settings.worker_poll_s,
            idle_poll_s=self.settings.worker_idle_poll_s,
            notified=self._notified,
            grace_s=self.settings.shutdown_grace_s,
        )
        self._keep(asyncio.create_task(self.worker.run_forever(), name="worker"))
        return self.worker

    def _notified(self) -> bool:
        """Whether PostgreSQL's notifications reach this process now (`start_listener`)."""
        return self.listener is not None and self.listener.listening.is_set()

    def start_listener(self) -> Listener | None:
        """Wake this process's readers of runs other processes run, and its worker when another
        process leaves a run claimable (PostgreSQL's NOTIFY; on SQLite readers and workers
        poll). What `pressloop serve` and `pressloop worker` do."""
        if self.database.is_sqlite:
            return None

        def wake_readers(run_id: str) -> None:
            # A run running here publishes its events on the bus already.
            if not self.runner.runs_here(run_id):
                self.bus.notify(run_id)

        def wake_worker(_payload: str = "") -> None:
            if self.worker is not None:
                self.worker.notice_claimable()

        listener = Listener(
            self.settings.resolved_database_url(),
            {EVENTS_CHANNEL: wake_readers, RUNS_CHANNEL: wake_worker},
            on_listening=wake_worker,
        )
        self._keep(asyncio.create_task(listener.run_forever(), name="listener"))
        self.listener = listener
        return listener

    def start_scheduler(self) -> Scheduler:
        """Run the heartbeat scheduler inside this process (what `pressloop serve` does)."""
        self.scheduler = Scheduler(
            database=self.database,
            now=self.now,
            max_attempts=self.settings.max_attempts,
            poll_s=self.settings.scheduler_poll_s,
            on_run=self._queued,
        )
        self._keep(asyncio.create_task(self.scheduler.run_forever(), name="scheduler"))
        return self.scheduler

    async def close(self) -> None:
        if self.scheduler is not None:
            self.scheduler.stop()
        if self.worker is not None:
            await self.worker.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.runner.close()
        await self.mcp_tools.aclose()
        close = getattr(self._provider, "aclose", None)
        if close is not None:
            await close()
        await self.wiring.aclose()
        await self.database.close()

    # Usage counters --------------------------------------------------------

    async def flush_usage(self) -> None:
        """Write this process's buffered usage counters now (the runner writes them at most once
        a second), so `usage()` read next includes every turn that ran here."""
        await self.runner.usage.flush()
