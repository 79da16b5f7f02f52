"""Failed sign-ins per client address: after `max_failures` within `window`, the address is
refused (429, Retry-After) until its oldest failure in the window is older than the window.

Kept in this process's memory: one API process counts its own failures. The clock is injected.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta

from pressloop.clock import Now
from pressloop.errors import RateLimited

# Addresses remembered at most; past that, the ones with no failure in the window are forgotten.
MAX_ADDRESSES = 10_000


class SignInThrottle:
    def __init__(self, *, now: Now, max_failures: int, window_s: float) -> None:
        self.now = now
        self.max_failures = max_failures
        self.window = timedelta(seconds=window_s)
        self._failures: dict[str, deque[datetime]] = {}

    def _recent(self, address: str, now: datetime) -> deque[datetime]:
        failures = self._failures.get(address, deque())
        while failures and failures[0] <= now - self.window:
            failures.popleft()
        return failures

    def check(self, address: str) -> None:
        """Raise `RateLimited` when this address failed too often lately."""
        now = self.now()
        failures = self._recent(address, now)
        if len(failures) >= self.max_failures:
            retry_after = failures[-self.max_failures] + self.window - now
            raise RateLimited(
                "too many failed sign-ins from this address: try again later",
                retry_after_s=retry_after.total_seconds(),
            )

    def failed(self, address: str) -> None:
        now = self.now()
        failures = self._recent(address, now)
        failures.append(now)
        self._failures[address] = failures
        if len(self._failures) > MAX_ADDRESSES:
            self._forget(now)

    def _forget(self, now: datetime) -> None:
        for address in [a for a in self._failures if not self._recent(a, now)]:
            del self._failures[address]
