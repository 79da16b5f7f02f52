"""The edges of the outbound-request tests: real HTTP(S) servers on 127.0.0.1 that record every
connection and request, fake name resolvers, and a dialer that stands in for the internet by
routing a few public addresses to local servers (every other address is dialed for real)."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import ip_address

import httpcore

from pressloop.actions.net.addresses import IPAddress

Route = tuple[int, dict[str, str], bytes]  # status, headers, body


class Site(ThreadingHTTPServer):
    """Answers `routes` by path (404 otherwise); counts connections, records (path, Host)."""

    daemon_threads = True

    def __init__(self, routes: dict[str, Route], tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes = routes
        self.connections = 0
        self.requests: list[tuple[str, str]] = []
        self.server_names: list[str | None] = []  # TLS SNI, as the server saw it
        if tls is not None:
            tls.sni_callback = self._sni
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def verify_request(self, request: object, client_address: object) -> bool:
        self.connections += 1
        return True

    def _sni(self, _tls: object, name: str | None, _context: object) -> None:
        self.server_names.append(name)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self._thread.join(timeout=5)


class _Handler(BaseHTTPRequestHandler):
    server: Site

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.server.requests.append((self.path, self.headers.get("Host", "")))
        status, headers, body = self.server.routes.get(self.path, (404, {}, b"missing"))
        self.send_response(status)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return None


def page(body: bytes = b"hello", kind: str = "text/plain") -> Route:
    return 200, {"Content-Type": kind}, body


def redirect(location: str) -> Route:
    return 302, {"Location": location}, b""


class Names:
    """A resolver from a fixed table; each name may answer differently on each call (the last
    answer repeats), as a rebinding name does. Records every call."""

    def __init__(self, table: dict[str, list[list[str]]]) -> None:
        self.table = table
        self.calls: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IPAddress]:
        self.calls.append(host)
        answers = self.table.get(host)
        if not answers:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = answers[min(self.calls.count(host), len(answers)) - 1]
        return [ip_address(address) for address in answer]


def names(**table: str | list[str]) -> Names:
    """`names(blog_test="127.0.0.1")`: one fixed answer per name (`_` stands for `.`)."""
    return Names(
        {
            name.replace("_", "."): [[answer] if isinstance(answer, str) else answer]
            for name, answer in table.items()
        }
    )


class Dial(httpcore.AsyncNetworkBackend):
    """Real TCP connections, except that `routes` sends a public address to a local port.
    Records every (address, port) asked for."""

    def __init__(self, routes: dict[str, int] | None = None) -> None:
        self.routes = routes or {}
        self.dialed: list[tuple[str, int]] = []
        self._real = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[tuple[int, int, int]] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.dialed.append((host, port))
        if host in self.routes:
            host, port = "127.0.0.1", self.routes[host]
        return await self._real.connect_tcp(host, port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await self._real.sleep(seconds)
