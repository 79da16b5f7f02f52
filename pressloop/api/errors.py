"""The one place where errors become HTTP answers: `{"error": {"code", "message"}}`, never a trace.

Pressloop's own errors carry their code and a message written for people; anything unexpected is
answered with a plain 500 (the server logs its traceback).
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
from starlette.exceptions import HTTPException

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


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, "invalid_request", describe_validation(exc.errors()))


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    try:
        phrase = HTTPStatus(exc.status_code).phrase
    except ValueError:
        phrase = "error"
    code = phrase.lower().replace(" ", "_").replace("-", "_")
    message = exc.detail if isinstance(exc.detail, str) else phrase
    return error_response(exc.status_code, code, message, dict(exc.headers or {}) or None)


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
