"""The app's routes as written, each with its full path, whichever way FastAPI keeps included
routers (a flat list, or a router per `include_router`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from starlette.routing import BaseRoute, Route, compile_path
from starlette.types import Scope


def iter_routes(routes: Sequence[BaseRoute], prefix: str = "") -> Iterator[tuple[str, BaseRoute]]:
    """(full path, route) for every route, through included routers."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            context = getattr(route, "include_context", None)
            inner = prefix + str(getattr(context, "prefix", ""))
            yield from iter_routes(included.routes, inner)
        elif isinstance(route, Route):
            yield prefix + route.path, route


def allowed_methods(routes: Sequence[BaseRoute], scope: Scope) -> list[str]:
    """Every method some route serves at the request's path."""
    path: str = scope["path"]
    root_path: str = scope.get("root_path", "")
    if root_path and path.startswith(root_path + "/"):
        path = path[len(root_path) :]
    methods: set[str] = set()
    for full_path, route in iter_routes(routes):
        assert isinstance(route, Route)
        regex, _format, _convertors = compile_path(full_path)
        if route.methods and regex.match(path):
            methods |= route.methods
    return sorted(methods)
