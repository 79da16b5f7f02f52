"""Turn the OpenAI and Anthropic SDK exceptions into `ProviderError`, so no SDK type leaks out.

Both SDKs come from the same generator and share one exception shape (`APIStatusError` with
`status_code` and a decoded `body`, `APITimeoutError`, `APIConnectionError`), so one mapping
serves both adapters. Each adapter hands over its own SDK's classes (`SDKErrors.of`): a process
that talks to one provider never imports the other's SDK (the `anthropic` import alone costs
about 0.3 s on a first turn).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from pressloop.errors import ProviderError

# 408 and 409 are what both SDKs retry themselves (request timeout, lock contention); 429 and
# every 5xx (Anthropic's 529 "overloaded" included) are the usual transient answers.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})

# Error types a provider sends inside a stream that already answered 200: the status code says
# nothing then, so the type decides whether a retry may help.
_RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error"}
)


@dataclass(frozen=True)
class SDKErrors:
    """One SDK's exception classes (both SDKs name them alike; only their base differs)."""

    base: type[Exception]
    timeout: type[Exception]
    connection: type[Exception]
    validation: type[Exception]
    status: type[Exception]
    api: type[Exception]

    @classmethod
    def of(cls, sdk: ModuleType, base: type[Exception]) -> SDKErrors:
        return cls(
            base=base,
            timeout=sdk.APITimeoutError,
            connection=sdk.APIConnectionError,
            validation=sdk.APIResponseValidationError,
            status=sdk.APIStatusError,
            api=sdk.APIError,
        )


@contextmanager
def translated(provider: str, errors: SDKErrors, *, what: str = "a body") -> Iterator[None]:
    """Around every SDK call and stream: SDK errors become `ProviderError`s."""
    try:
        yield
    except errors.base as exc:
        raise map_sdk_error(provider, exc, errors) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # the SDK could not decode it
        raise garbage(provider, f"{what} that is not JSON") from exc
    except ValueError as exc:  # the SDK refused the request before sending it
        raise ProviderError(f"{provider} client error: {exc}", retryable=False) from exc


def is_retryable_status(status: int) -> bool:
    return status in _RETRYABLE_STATUSES or status >= 500


def map_sdk_error(provider: str, exc: Exception, errors: SDKErrors) -> ProviderError:
    """The `ProviderError` for an SDK exception; the caller raises it `from exc`."""
    # Order matters: a timeout is a connection error, a validation error is an API error.
    refused = _network_failure(exc)
    if isinstance(exc, errors.timeout) and refused is None:
        return ProviderError(
            f"{provider} did not answer in time (request timed out)", retryable=True
        )
    if isinstance(exc, errors.connection):  # the SDKs' timeout error is one of these
        cause = refused or exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return ProviderError(f"could not reach {provider}{detail}", retryable=True)
    if isinstance(exc, errors.validation):
        return garbage(provider, "a body that is not the expected response")
    if isinstance(exc, errors.status):
        status: Any = exc  # typed by the SDK it came from: status_code, body, message
        detail = error_detail(status.body) or status.message
        if status.status_code >= 400:
            return ProviderError(
                f"{provider} answered {status.status_code}: {detail}",
                retryable=is_retryable_status(status.status_code),
            )
        # An error event inside a stream that began with 200 OK.
        return _stream_error(provider, status.body, detail)
    if isinstance(exc, errors.api):
        api: Any = exc
        return _stream_error(provider, api.body, error_detail(api.body) or api.message)
    # Any other SDK error (a credentials helper, a webhook check) is a setup problem.
    return ProviderError(f"{provider} client error: {exc}", retryable=False)


def _network_failure(exc: BaseException) -> OSError | None:
    """The refused or reset connection behind an SDK error, if that is what it was.

    The SDKs' aiohttp transport reports a refused connection as a connect *timeout* (its
    exception map picks the first match); the cause chain still holds the real error.
    """
    cause: BaseException | None = exc
    for _ in range(8):
        if cause is None:
            return None
        if isinstance(cause, OSError) and not isinstance(cause, TimeoutError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def garbage(provider: str, what: str) -> ProviderError:
    """A 200 answer we cannot read (not JSON, the wrong shape, empty).

    Retryable on purpose: in practice this is a proxy or gateway hiccup (an HTML error page with
    200, a truncated body) rather than a stable answer, and the retry budget bounds the cost.
    """
    return ProviderError(f"{provider} answered with {what}", retryable=True)


def error_detail(body: object) -> str:
    """The provider's own error message from a decoded error body, or ''."""
    if isinstance(body, dict):
        inner: Any = body.get("error", body)
        if isinstance(inner, dict):
            message = inner.get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(inner, str) and inner:
            return inner
        message = body.get("message")
        if isinstance(message, str) and message:
            return message
    if isinstance(body, str):
        return body.strip()[:300]
    return ""


def _error_type(body: object) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            return str(inner["type"])
    return ""


def _stream_error(provider: str, body: object, detail: str) -> ProviderError:
    kind = _error_type(body)
    # An unknown type mid-stream is most often the server giving up: let the retry decide.
    retryable = kind in _RETRYABLE_ERROR_TYPES or kind == ""
    label = f" ({kind})" if kind else ""
    return ProviderError(f"{provider} stream failed{label}: {detail}", retryable=retryable)
