"""Several `pressloop serve` processes on one port (`PRESSLOOP_SERVE_PROCESSES`).

One process carries every stream it serves on one event loop: when hundreds of streams' tokens
arrive together, a stream's token waits behind the others' (docs/benchmarks.md, "the floor of
one loop"). With N processes, the first binds N sockets to the address with SO_REUSEPORT and
starts N-1 more `pressloop serve --fd`, each given one of them; the kernel spreads the new
connections over the sockets, so each process serves about 1/N of the streams, and runs the
turns posted to it (a streamed turn runs where it was posted, its deltas go out before their
commit).

Each process is a whole `pressloop serve` (API, worker, scheduler) on the shared database, as
several serve processes behind one address already are (docs/operations.md): runs are leased,
due schedules are taken once, a stream resumes in any process. The first process alone prepares
the data directory, the first admin token and the local WordPress, before the others start.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping

from pressloop.config import Settings


def reuse_port_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """`count` listening sockets on one address (port 0: a free one, the same for all). One
    socket is bound without SO_REUSEPORT: a second server started on a port in use must fail,
    not quietly take half of its connections."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            # IPPROTO_TCP, not the default 0: asyncio turns Nagle's algorithm off (TCP_NODELAY)
            # only on a connection whose socket says TCP, and an accepted connection says what
            # its listening socket said. With Nagle on, an answer written in two parts (the
            # headers, then the body) held the body back until the client's delayed ACK: about
            # 40 ms more on every request after the first on a kept-alive connection.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            port = sock.getsockname()[1]
            sock.listen(2048)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def shared_env(settings: Settings) -> dict[str, str]:
    """The site the first process found (its local WordPress): the others act on the same.
    And their share of the machine's database connections (they are started as one process
    each)."""
    env = {"PRESSLOOP_DB_POOL_SIZE": str(settings.resolved_db_pool_size())}
    if not settings.wp_url:
        return env
    env["PRESSLOOP_WP_URL"] = settings.wp_url
    if settings.wp_user:
        env["PRESSLOOP_WP_USER"] = settings.wp_user
    if settings.wp_app_password:
        env["PRESSLOOP_WP_APP_PASSWORD"] = settings.wp_app_password
    return env


class ServingProcesses:
    """The other serving processes, one socket each; stopped with the first."""

    def __init__(
        self,
        sockets: list[socket.socket],
        env: Mapping[str, str],
        own_env: list[dict[str, str]] | None = None,
    ) -> None:
        """`own_env`: each process's own settings beside `env` (its stream process's)."""
        self.processes: list[subprocess.Popen[bytes]] = []
        base = {**os.environ, **env, "PRESSLOOP_SERVE_PROCESSES": "1"}
        for index, sock in enumerate(sockets):
            fd = sock.fileno()
            command = [sys.executable, "-m", "pressloop.cli", "serve", "--fd", str(fd)]
            own = own_env[index] if own_env else {}
            self.processes.append(subprocess.Popen(command, pass_fds=(fd,), env={**base, **own}))
            # The child has it now; a copy kept here would keep a stopped child's socket
            # receiving connections nobody accepts.
            sock.close()

    def stop(self, grace_s: float) -> None:
        """SIGTERM (each finishes its runs' writes and closes), SIGKILL after `grace_s`."""
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
