"""The OpenAPI document tells the truth: readable operation ids, and on every route the error
statuses it can answer, each with the shared `ErrorBody` (`api/errors.py`).

The statuses every route shares follow from what it is made of, so they cannot drift:
- 401 where a token is needed; 403 where the role needed is above viewer, or the method
  changes something (a signed-in browser must send its UI header then);
- 404 where the path names something; 400 and 413 where there is a body;
- 422 everywhere: any parameter, header or body out of bounds, and any path or query holding
  text that cannot be stored (`bounds.plain_text` runs on every route).
What only some routes answer (409, 429, 503) each route declares itself (`error_responses`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any, get_args

from fastapi import FastAPI
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.utils import create_model_field

from pressloop.api.auth import SAFE_METHODS, Admin, Operator, bearer, session_cookie
from pressloop.api.errors import error_responses
from pressloop.api.routes import iter_routes


def operation_id(route: APIRoute) -> str:
    """A route's operation id is its function's name: `list_threads`, `post_run`."""
    return route.name


def _dependants(dependant: Dependant) -> Iterator[Dependant]:
    yield dependant
    for inner in dependant.dependencies:
        yield from _dependants(inner)


def _calls(annotated: Any) -> Any:
    return get_args(annotated)[1].dependency


def error_statuses(route: APIRoute) -> set[int]:
    """The error statuses a route can answer, from its parts."""
    parts = list(_dependants(route.dependant))
    calls = {part.call for part in parts}
    statuses = {422}
    if calls & {bearer, session_cookie}:
        statuses.add(401)
        raised_role = calls & {_calls(Operator), _calls(Admin)}
        if raised_role or not (route.methods or set()) <= SAFE_METHODS:
            statuses.add(403)
    if any(part.path_params for part in parts):
        statuses.add(404)
    if any(part.body_params for part in parts):
        statuses |= {400, 413}
    return statuses


def document_errors(app: FastAPI) -> None:
    """Declare each route's error statuses (what a route declares itself is kept), and check
    that operation ids are unique. Call once every router is included."""
    routes = [
        r for _path, r in iter_routes(app.routes) if isinstance(r, APIRoute) and r.include_in_schema
    ]
    duplicated = [name for name, n in Counter(operation_id(r) for r in routes).items() if n > 1]
    if duplicated:
        raise RuntimeError(f"operation ids must be unique: {', '.join(sorted(duplicated))}")
    for route in routes:
        for status, response in error_responses(*sorted(error_statuses(route))).items():
            if status in route.responses:
                continue
            route.responses[status] = response
            # What FastAPI does for a `responses=` given to the route: the model's field.
            route.response_fields[status] = create_model_field(
                name=f"Response_{status}_{route.unique_id}",
                type_=response["model"],
                mode="serialization",
            )
