"""Connections pinned to the address that was checked: no second name resolution.

httpx hands the connecting to httpcore, whose network backend receives the URL's host name.
`PinnedBackend` is that backend: it resolves the name once (the injectable `Resolver`), checks
every address it got, and opens the TCP connection to a checked address itself. The URL keeps
its host name, so the Host header, TLS SNI and certificate verification are all for the name;
only the socket goes to the pinned IP. A name that answers a public address to the check and
127.0.0.1 to the connect (DNS rebinding) cannot work: there is only one answer.

`pressloop.actions.net.transport.PinnedTransport` puts this backend under httpx.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Iterable
from ipaddress import ip_address

import httpcore

from pressloop.actions.net.addresses import IPAddress, refusal
from pressloop.errors import ActionError

# host, port -> every address the name has; an OSError when it has none.
Resolver = Callable[[str, int], Awaitable[list[IPAddress]]]
SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


async def system_resolver(host: str, port: int) -> list[IPAddress]:
    """getaddrinfo, in a thread (asyncio's default executor)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(ip_address(info[4][0]) for info in infos))


async def checked_addresses(
    host: str, port: int, *, resolver: Resolver, allow_private: bool
) -> list[IPAddress]:
    """The addresses to connect to for `host`, each checked; refused if any is not public."""
    try:
        addresses: list[IPAddress] = [ip_address(host)]  # a literal: nothing to resolve
    except ValueError:
        try:
            addresses = list(await resolver(host, port))
        except OSError as exc:
            raise ActionError(f"cannot resolve {host}: {exc}") from exc
    if not addresses:
        raise ActionError(f"cannot resolve {host}: no address")
    for address in addresses if not allow_private else ():
        if (why := refusal(address)) is not None:
            raise ActionError(
                f"refused: {host} resolves to {address} ({why}), not a public address; "
                "private or loopback addresses need PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE=1"
            )
    return addresses


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Resolve once, check, connect to the checked address through `dial`."""

    def __init__(
        self, *, resolver: Resolver, allow_private: bool, dial: httpcore.AsyncNetworkBackend
    ) -> None:
        self._resolver = resolver
        self._allow_private = allow_private
        self._dial = dial

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            async with asyncio.timeout(timeout):
                addresses = await checked_addresses(
                    host, port, resolver=self._resolver, allow_private=self._allow_private
                )
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} took over {timeout} s") from exc
        failure: Exception | None = None
        for address in addresses:  # in the resolver's order; each attempt has the timeout
            try:
                return await self._dial.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ActionError("refused: no Unix sockets for outbound requests")

    async def sleep(self, seconds: float) -> None:
        await self._dial.sleep(seconds)
