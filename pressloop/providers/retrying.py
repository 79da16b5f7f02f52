"""Retries around any provider: exponential backoff with full jitter, for retryable errors only.

The adapters ask their SDKs for no retries at all, so this is the one place that decides how
often and how long to wait; the sleep and the random source are injected so tests never wait.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable

from pressloop.backoff import full_jitter
from pressloop.clock import Sleep, real_sleep
from pressloop.errors import ProviderError
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    StreamPart,
    TextDelta,
    WrappedProvider,
)


class RetryingProvider(WrappedProvider):
    """Wraps a `Provider`; retries `ProviderError(retryable=True)` up to `max_retries` times."""

    def __init__(
        self,
        inner: Provider,
        *,
        max_retries: int,
        base_s: float,
        cap_s: float,
        sleep: Sleep = real_sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        super().__init__(inner)
        self._max_retries = max(0, max_retries)
        self._base_s = base_s
        self._cap_s = cap_s
        self._sleep = sleep
        self._rand = rand

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        attempt = 0
        while True:
            try:
                return await self.inner.complete(request)
            except ProviderError as exc:
                await self._before_retry(exc, attempt)
            attempt += 1

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        attempt = 0
        while True:
            started = False
            parts = self.inner.stream(request)
            try:
                async for part in parts:
                    started = started or isinstance(part, TextDelta)
                    yield part
                return
            except ProviderError as exc:
                # Text already shown to someone cannot be taken back: fail as-is.
                if started:
                    raise
                await self._before_retry(exc, attempt)
            finally:
                await _close(parts)
            attempt += 1

    async def _before_retry(self, exc: ProviderError, attempt: int) -> None:
        """Sleep before the next attempt, or re-raise `exc` when no retry is allowed."""
        if not exc.retryable:
            raise exc
        if attempt >= self._max_retries:
            attempts = attempt + 1
            exc.message = f"{exc.message} (gave up after {attempts} attempt{'s' * (attempts > 1)})"
            exc.args = (exc.message,)
            raise exc
        # `attempt` is the 0-based index of the attempt that just failed: this is retry attempt + 1.
        delay = full_jitter(attempt + 1, base_s=self._base_s, cap_s=self._cap_s, rand=self._rand)
        await self._sleep(delay)


async def _close(parts: AsyncIterator[StreamPart]) -> None:
    # An abandoned async generator would otherwise be finalised later, outside our control.
    close = getattr(parts, "aclose", None)
    if close is not None:
        await close()
