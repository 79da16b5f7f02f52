"""A streamed model call sent straight through the SDK's own HTTP client, read by the SDK's own
stream class.

The SDKs' `post` spends most of a streamed call's CPU in the client on building the request:
its options copied and validated, the base URL parsed and merged, the headers merged and
checked, auth hooks, retry bookkeeping (`max_retries=0` here: `RetryingProvider` retries): of
0.72 ms of CPU a call through `post` on AMD EPYC 25/17, this path leaves 0.46 (the SDK's typed
`create` takes 1.69, aiohttp alone 0.19: `python -m bench.model_client`), and hundreds of
streams send their calls together, on the event loop that writes their tokens.
Everything that does not change between calls (the URL, the headers) is made once here; what
is sent, how it is sent (the SDK's pooled client on its aiohttp transport, its timeout) and how
the answer is read (`AsyncStream`: SSE decoding, error events, draining for reuse) are the
SDK's, and failures are raised as the SDK's own exception classes, so `errors_map` reads them
as it reads the SDK's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import httpx2


class StreamCalls:
    """Streamed POSTs to one path of one provider (or of the stream process that relays it)."""

    def __init__(
        self, sdk: ModuleType, client: Any, http: httpx2.AsyncClient, path: str, timeout_s: float
    ) -> None:
        """`sdk`: the `openai` or `anthropic` module; `client`: its client, whose headers and
        stream class the calls use; `http`: the HTTP client it was given (`wire.http_client`),
        which sends them; `path`: relative to a base URL."""
        self._sdk = sdk
        self._client = client
        self._http = http
        self._path = path.lstrip("/")
        self._timeout = {"timeout": httpx2.Timeout(timeout_s).as_dict()}
        self._headers: dict[str, str] | None = None
        self._urls: dict[str, httpx2.URL] = {}

    def headers(self) -> dict[str, str]:
        """The SDK's own: its version, platform and event loop, the key (or what its auth
        sets), the configured extra headers; none that one call changes (retries, idempotency).
        Made on the first call, in the event loop (the SDK names the loop's library)."""
        if self._headers is None:
            merged = {**self._client.default_headers, **self._client.auth_headers}
            self._headers = {k: v for k, v in merged.items() if isinstance(v, str)}
        return self._headers

    def url(self, base_url: str) -> httpx2.URL:
        """`path` under `base_url`, as the SDK joins them, parsed once per base URL."""
        url = self._urls.get(base_url)
        if url is None:
            url = httpx2.URL(base_url.rstrip("/") + "/" + self._path)
            if len(self._urls) < 8:  # the provider and the stream process's relay
                self._urls[base_url] = url
        return url

    async def open(
        self, base_url: str, body: bytes, extra_headers: Mapping[str, str] | None = None
    ) -> Any:
        """The SDK's `AsyncStream` of the answer (iterate it in `async with`), or the SDK's
        exception: a timeout, a connection that failed, an answer that is not a success."""
        headers = {**self.headers(), **extra_headers} if extra_headers else self.headers()
        request = httpx2.Request(
            "POST", self.url(base_url), headers=headers, content=body, extensions=self._timeout
        )
        sdk = self._sdk
        try:
            response = await self._http.send(request, stream=True)
        except httpx2.TimeoutException as exc:
            raise sdk.APITimeoutError(request=request) from exc
        except httpx2.TransportError as exc:
            raise sdk.APIConnectionError(request=request) from exc
        if not response.is_success:
            raise await _status_error(sdk, response)
        return sdk.AsyncStream(cast_to=object, response=response, client=self._client)


async def _status_error(sdk: ModuleType, response: httpx2.Response) -> Exception:
    """The SDK's status error for an answer that is not a success, its body read and decoded
    as the SDK does (JSON when it is, else the text)."""
    try:
        content = await response.aread()
    except httpx2.HTTPError:
        content = b""  # the status alone says what went wrong
    finally:
        await response.aclose()
    text = content.decode(response.encoding or "utf-8", errors="replace")
    body: object
    try:
        body = json.loads(text)
    except ValueError:
        body = text or None
    message = f"Error code: {response.status_code} - {body}"
    return sdk.APIStatusError(message, response=response, body=body)  # type: ignore[no-any-return]
