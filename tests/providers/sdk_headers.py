"""What a streamed call (`providers/stream_calls.py`) must send as a call through the SDK's
`post` does: every header but those `post` sets per call."""

from __future__ import annotations

from collections.abc import Mapping

# Set by `post` per call (its retry count and timeouts), or by the HTTP client for whatever it
# sends (its compression offer, the connection's own): not the provider's.
PER_CALL = frozenset(
    {
        "x-stainless-retry-count",
        "x-stainless-read-timeout",
        "x-stainless-timeout",
        "accept-encoding",
        "content-length",
        "connection",
        "host",
    }
)


def provider_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """`headers` by lowercase name, without the per-call ones."""
    return {k.lower(): v for k, v in headers.items() if k.lower() not in PER_CALL}
