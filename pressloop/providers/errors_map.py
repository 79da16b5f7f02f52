"""Turn the OpenAI and Anthropic SDK exceptions into `ProviderError`, so no SDK type leaks out.

Both SDKs come from the same generator and share one exception shape (`APIStatusError` with
`status_code` and a decoded `body`, `APITimeoutError`, `APIConnectionError`), so one mapping
serves both adapters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import openai

from pressloop.errors import ProviderError

# 408 and 409 are what both SDKs retry themselves (request timeout, lock contention); 429 and
# every 5xx (Anthropic's 529 "overloaded" included) are the usual transient answers.
_RETRYABLE_STATUSES = frozenset({408, 409, 429})

# Error types a provider sends inside a stream that already answered 200: the status code says
# nothing then, so the type decides whether a retry may help.
_RETRYABLE_ERROR_TYPES = frozenset(
    {"overloaded_error", "api_error", "rate_limit_error", "server_error", "timeout_error"}
)

_TIMEOUT_ERRORS = (openai.APITimeoutError, anthropic.APITimeoutError)
_CONNECTION_ERRORS = (openai.APIConnectionError, anthropic.APIConnectionError)
_VALIDATION_ERRORS = (openai.APIResponseValidationError, anthropic.APIResponseValidationError)
_STATUS_ERRORS = (openai.APIStatusError, anthropic.APIStatusError)
_API_ERRORS = (openai.APIError, anthropic.APIError)
SDK_ERRORS: tuple[type[Exception], ...] = (openai.OpenAIError, anthropic.AnthropicError)


@contextmanager
def translated(provider: str, *, what: str = "a body") -> Iterator[None]:
    """Around every SDK call and stream: SDK errors become `ProviderError`s."""
    try:
        yield
    except SDK_ERRORS as exc:
        raise map_sdk_error(provider, exc) from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # the SDK could not decode it
        raise garbage(provider, f"{what} that is not JSON") from exc
    except ValueError as exc:  # the SDK refused the request before sending it
        raise ProviderError(f"{provider} client error: {exc}", retryable=False) from exc


def is_retryable_status(status: int) -> bool:
    return status in _RETRYABLE_STATUSES or status >= 500


def map_sdk_error(provider: str, exc: Exception) -> ProviderError:
    """The `ProviderError` for an SDK exception; the caller raises it `from exc`."""
    # Order matters: a timeout is a connection error, a validation error is an API error.
    if isinstance(exc, _TIMEOUT_ERRORS):
        return ProviderError(
            f"{provider} did not answer in time (request timed out)", retryable=True
        )
    if isinstance(exc, _CONNECTION_ERRORS):
        cause = exc.__cause__ or exc.__context__
        detail = f": {cause}" if cause is not None and str(cause) else ""
        return ProviderError(f"could not reach {provider}{detail}", retryable=True)
    if isinstance(exc, _VALIDATION_ERRORS):
        return garbage(provider, "a body that is not the expected response")
    if isinstance(exc, _STATUS_ERRORS):
        detail = error_detail(exc.body) or exc.message
        if exc.status_code >= 400:
            return ProviderError(
                f"{provider} answered {exc.status_code}: {detail}",
                retryable=is_retryable_status(exc.status_code),
            )
        # An error event inside a stream that began with 200 OK.
        return _stream_error(provider, exc.body, detail)
    if isinstance(exc, _API_ERRORS):
        return _stream_error(provider, exc.body, error_detail(exc.body) or exc.message)
    # Any other SDK error (a credentials helper, a webhook check) is a setup problem.
    return ProviderError(f"{provider} client error: {exc}", retryable=False)


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
