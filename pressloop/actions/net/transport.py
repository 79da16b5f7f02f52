"""`PinnedTransport`: an httpx transport whose every connection `PinnedBackend` opens.

httpx 0.28 does not take an httpcore network backend, so the transport is built here from
httpcore's public API (a connection pool with `network_backend=`), converting requests,
responses and errors the way httpx's own transport does. HTTP/1.1 only; no proxies.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager

import httpcore
import httpx

from pressloop.actions.net.pinned import PinnedBackend, Resolver

_ERRORS: dict[type[Exception], type[httpx.TransportError]] = {
    httpcore.ConnectTimeout: httpx.ConnectTimeout,
    httpcore.ReadTimeout: httpx.ReadTimeout,
    httpcore.WriteTimeout: httpx.WriteTimeout,
    httpcore.PoolTimeout: httpx.PoolTimeout,
    httpcore.ConnectError: httpx.ConnectError,
    httpcore.ReadError: httpx.ReadError,
    httpcore.WriteError: httpx.WriteError,
    httpcore.RemoteProtocolError: httpx.RemoteProtocolError,
    httpcore.LocalProtocolError: httpx.LocalProtocolError,
    httpcore.UnsupportedProtocol: httpx.UnsupportedProtocol,
}
_CORE_ERRORS = (
    httpcore.TimeoutException,
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)


@contextmanager
def _as_httpx_errors() -> Iterator[None]:
    try:
        yield
    except _CORE_ERRORS as exc:
        raise _ERRORS.get(type(exc), httpx.TransportError)(str(exc)) from exc


class _Body(httpx.AsyncByteStream):
    def __init__(self, stream: AsyncIterable[bytes]) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx_errors():
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        close = getattr(self._stream, "aclose", None)  # httpcore's body returns the connection
        if close is not None:
            await close()


class PinnedTransport(httpx.AsyncBaseTransport):
    """HTTP/1.1 over connections `PinnedBackend` opens (`dial`: the real TCP by default)."""

    def __init__(
        self,
        *,
        resolver: Resolver,
        allow_private: bool,
        ssl_context: ssl.SSLContext,
        dial: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        backend = PinnedBackend(
            resolver=resolver, allow_private=allow_private, dial=dial or httpcore.AnyIOBackend()
        )
        self._pool = httpcore.AsyncConnectionPool(ssl_context=ssl_context, network_backend=backend)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx_errors():
            response = await self._pool.handle_async_request(core)
        assert isinstance(response.stream, AsyncIterable)
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_Body(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()
