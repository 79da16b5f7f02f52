"""Every endpoint and dependency of the app (API and UI) is a coroutine: FastAPI runs a plain
`def` one on a worker thread, a hop to another thread and back on every request, contending for
the interpreter with the event loop that carries the streams (docs/benchmarks.md, section 3j)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from pressloop.api import create_app
from pressloop.ui import mount_ui
from tests.api.test_meta import unreachable_service


def _calls(dependant: Dependant) -> Iterator[Any]:
    if dependant.call is not None:
        yield dependant.call
    for sub in dependant.dependencies:
        yield from _calls(sub)


def _api_routes(routes: list[Any]) -> Iterator[APIRoute]:
    """The app's routes, through its included routers (FastAPI keeps each one's own routes on
    it, as `original_router`)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        elif (router := getattr(route, "original_router", None)) is not None:
            yield from _api_routes(router.routes)


def _runs_on_the_loop(call: Any) -> bool:
    # A function, or an instance whose `__call__` is (FastAPI's security schemes).
    return inspect.iscoroutinefunction(call) or inspect.iscoroutinefunction(type(call).__call__)


async def test_no_endpoint_or_dependency_runs_on_a_worker_thread(tmp_path: Path) -> None:
    service = unreachable_service(tmp_path)
    app = mount_ui(create_app(service))
    routes = list(_api_routes(app.routes))
    on_threads = {
        f"{sorted(route.methods)} {route.path}: {getattr(call, '__qualname__', call)}"
        for route in routes
        for call in _calls(route.dependant)
        if not _runs_on_the_loop(call)
    }
    await service.close()
    assert len(routes) > 50  # the walk saw the whole app
    assert on_threads == set()
