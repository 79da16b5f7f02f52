"""The one place where errors become HTTP answers: `{"error": {"code", "message"}}`, never a trace.

Pressloop's own errors carry their code and a message written for people; anything unexpected is
answered with a plain 500 (the server logs its traceback). `ErrorBody` and `error_responses` say
the same in the OpenAPI document (`api/openapi.py` declares them on every route).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException

from pressloop.api.routes import allowed_methods
from pressloop.errors import (
    ConfigurationError,
    Conflict,
    InvalidRequest,
    NotFound,
    PayloadTooLarge,
    PressloopError,
    RateLimited,
)

log = logging.getLogger(__name__)


class Unauthorized(PressloopError):
    code = "unauthorized"


class Forbidden(PressloopError):
    code = "forbidden"


# Most specific first: the first class an error is an instance of decides its status.
STATUS_BY_ERROR: tuple[tuple[type[PressloopError], int], ...] = (
    (Unauthorized, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (Conflict, 409),
    (PayloadTooLarge, 413),
    (RateLimited, 429),
    (InvalidRequest, 422),
    # The server is not set up to do this (no provider, agent disabled): not the caller's fault.
    (ConfigurationError, 503),
)


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable and machine-readable: not_found, invalid_request, ...")
    message: str = Field(description="What went wrong, written for a person.")


class ErrorBody(BaseModel):
    """Every error answer: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


ERROR_DESCRIPTIONS: dict[int, str] = {
    400: "The request cannot be read (a body that is not JSON text).",
    401: "No valid API token or UI session.",
    403: "The token's role may not do this (or a signed-in browser left out its UI header).",
    404: "Something the request names does not exist.",
    409: "The state of what the request names does not allow it now.",
    413: "The body, or the message in it, is over the limit.",
    422: "The request is invalid: a field, a parameter or a header out of its bounds.",
    429: "Too many requests: wait for Retry-After seconds.",
    503: "The service cannot answer now.",
}
ERROR_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "Bearer", "schema": {"type": "string"}}},
    429: {
        "Retry-After": {
            "description": "Seconds to wait.",
            "required": True,
            "schema": {"type": "integer", "minimum": 1},
        }
    },
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for these error statuses, each with the shared `ErrorBody`."""
    return {
        status: {
            "model": ErrorBody,
            "description": ERROR_DESCRIPTIONS[status],
            **({"headers": ERROR_HEADERS[status]} if status in ERROR_HEADERS else {}),
        }
        for status in statuses
    }


def status_for(error: PressloopError) -> int:
    for cls, status in STATUS_BY_ERROR:
        if isinstance(error, cls):
            return status
    return 500


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def describe_validation(errors: Sequence[Any]) -> str:
    """FastAPI's validation errors as one readable line: `body.message: Field required`."""
    parts = []
    for error in errors:
        loc = ".".join(str(p) for p in error.get("loc", ()))
        if error.get("type") == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            parts.append(f"the body is not valid JSON ({detail})" if detail else "invalid JSON")
            continue
        parts.append(f"{loc}: {error.get('msg', 'invalid')}" if loc else error.get("msg", ""))
    return "; ".join(parts) or "the request is invalid"


async def _pressloop_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PressloopError)
    status = status_for(exc)
    if status == 500:
        log.error("request failed: %s: %s", type(exc).__name__, exc.message)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if isinstance(exc, RateLimited):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    return error_response(status, exc.code, exc.message, headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    sent_as = request.headers.get("content-type", "")
    if _body_not_read_as_json(errors, sent_as):
        # `curl -d '{...}'` without `-H 'content-type: application/json'`: FastAPI leaves a form
        # body unparsed, and its own message ("Input should be a valid dictionary") says
        # nothing of why. Reading such a body as JSON anyway would let a page on another site
        # post to the API with a plain HTML form (no CORS preflight): said, not guessed.
        message = (
            "the body must be JSON, sent with Content-Type: application/json "
            f"(this request's is {sent_as.split(';')[0].strip()[:80]})"
        )
        return error_response(422, "invalid_request", message)
    return error_response(422, "invalid_request", describe_validation(errors))


def _body_not_read_as_json(errors: Sequence[Any], content_type: str) -> bool:
    """The whole body was refused (not a field of it) and was not sent as JSON."""
    media = content_type.split(";")[0].strip().lower()
    if not media or media == "application/json" or media.endswith("+json"):
        return False
    return any(tuple(error.get("loc", ())) == ("body",) for error in errors)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    try:
        phrase = HTTPStatus(exc.status_code).phrase
    except ValueError:
        phrase = "error"
    code = phrase.lower().replace(" ", "_").replace("-", "_")
    message = exc.detail if isinstance(exc.detail, str) else phrase
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        # Starlette names only the methods of the first route matching the path, though
        # GET and POST of one path are two routes.
        headers["Allow"] = ", ".join(allowed_methods(request.app.router.routes, request.scope))
    return error_response(exc.status_code, code, message, headers or None)


async def _unexpected(_request: Request, _exc: Exception) -> JSONResponse:
    # Starlette re-raises the exception after this answer, so the server logs its traceback.
    return error_response(
        500, "internal_error", "an unexpected error occurred; the server log has the details"
    )


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PressloopError, _pressloop_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
