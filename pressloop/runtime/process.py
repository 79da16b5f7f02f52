"""A worker process (`pressloop worker`): claims runs until told to stop.

SIGTERM or SIGINT stop it gracefully: no new claims, running turns get a grace period to reach a
resting state, the rest are handed back to the queue for another worker.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import uvloop

from pressloop.config import Settings
from pressloop.observability.exposition import MetricsServer, serve_metrics
from pressloop.observability.logs import configure_logging
from pressloop.observability.tracing import setup_tracing, shutdown_tracing
from pressloop.runtime import collector
from pressloop.runtime.service import Service

log = logging.getLogger(__name__)


async def run_worker(
    settings: Settings,
    *,
    concurrency: int | None = None,
    scheduler: bool = False,
) -> None:
    configure_logging(settings)  # PRESSLOOP_LOG_FORMAT, PRESSLOOP_LOG_LEVEL
    setup_tracing()  # OTEL_*: off unless an exporter is configured
    service = await Service.open(settings)
    try:
        metrics = worker_metrics(service)  # PRESSLOOP_METRICS_PORT, off when unset
    except BaseException:  # refused (a public address) or the port is taken
        await service.close()
        shutdown_tracing()
        raise
    unwatch_gc = collector.settle_process(settings, service.metrics, collector.WORKER_THRESHOLDS)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    worker = service.start_worker(concurrency)
    service.start_listener()  # PostgreSQL: a run another process queued starts at once
    if scheduler:
        service.start_scheduler()
    log.info("worker %s started (concurrency %d)", service.runner.owner, worker.concurrency)
    try:
        await stop.wait()
    finally:
        log.info("worker %s stopping", service.runner.owner)
        await worker.stop()  # PRESSLOOP_SHUTDOWN_GRACE
        await service.close()
        unwatch_gc()
        if metrics is not None:
            metrics.close()
        shutdown_tracing()  # the last spans exported


def worker_metrics(service: Service) -> MetricsServer | None:
    """This worker's metrics on its own port (PRESSLOOP_METRICS_HOST:PRESSLOOP_METRICS_PORT),
    without a token: a loopback or private address only (docs/operations.md)."""
    settings = service.settings
    if settings.metrics_port is None:
        return None
    server = serve_metrics(
        service.metrics.registry, host=settings.metrics_host, port=settings.metrics_port
    )
    log.info("metrics on http://%s:%d/metrics", settings.metrics_host, server.port)
    return server


def main(argv: list[str] | None = None) -> None:
    """`python -m pressloop.runtime.process` (the same as `pressloop worker`)."""
    import argparse

    parser = argparse.ArgumentParser(prog="pressloop worker")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--scheduler", action="store_true", help="also run the scheduler")
    args = parser.parse_args(argv)
    # uvloop: the same event loop `pressloop serve` and the CLI run on (cli_common.run_loop).
    uvloop.run(run_worker(Settings(), concurrency=args.concurrency, scheduler=args.scheduler))


if __name__ == "__main__":
    main()
