"""Serving the metrics: the text a scrape gets, where metrics may be served without a token,
and a worker's own metrics port.

Without a token (PRESSLOOP_METRICS_PUBLIC=1 on `pressloop serve`, or a worker's
PRESSLOOP_METRICS_PORT) metrics are served only on a loopback or private address: they name the
actions, models and run counts of the site, which is not for the whole internet. A host name
other than `localhost`, or an unspecified address (`0.0.0.0`, `::`, every interface, public ones
included), is refused: put a private address, or a reverse proxy that checks a token, in front.
"""

from __future__ import annotations

import ipaddress
import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import start_http_server
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import CollectorRegistry

from pressloop.errors import ConfigurationError


def render(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """The registry in the format the scraper asked for (Prometheus text, or OpenMetrics)."""
    encoder, content_type = choose_encoder(accept or "")
    return encoder(registry), content_type


def private_address(host: str) -> bool:
    """Whether `host` is a loopback or private address (or `localhost`)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host.strip().strip("[]"))
    except ValueError:
        return False  # a name: it may resolve to anything
    if address.is_unspecified:
        return False  # every interface, public ones included
    return address.is_loopback or address.is_private


def check_open_metrics_address(host: str, setting: str) -> None:
    """Refuse to serve metrics without a token on an address the internet may reach."""
    if not private_address(host):
        raise ConfigurationError(
            f"{setting} serves metrics without a token, which Pressloop only does on a loopback "
            f"or private address; {host!r} is not one. Listen on 127.0.0.1 or a private "
            "address (10/8, 172.16/12, 192.168/16, fc00::/7), or keep the token "
            "(docs/operations.md, Metrics and logs)"
        )


@dataclass
class MetricsServer:
    """A worker's metrics port (prometheus_client's small HTTP server, in a thread)."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(registry: CollectorRegistry, *, host: str, port: int) -> MetricsServer:
    """Serve `registry` at http://host:port/metrics (and /), without a token: `host` must be a
    loopback or private address."""
    check_open_metrics_address(host, "PRESSLOOP_METRICS_PORT")
    server, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(server=server, thread=thread)
