"""Starting the stream process from `pressloop serve`'s first process (`PRESSLOOP_STREAM_PROCESS`).

The first process makes both of its sockets and passes them on, so their addresses are known
before the stream process runs: the unix socket for streams handed over (in a directory only
this user reads) and a loopback socket for relayed model calls, whose paths carry a secret the
serving processes are given and nobody else.
"""

from __future__ import annotations

import logging
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pydantic import SecretStr

from pressloop.config import Settings
from pressloop.streamer.process import SECRET_ENV

logger = logging.getLogger(__name__)


class StreamProcess:
    def __init__(
        self,
        process: subprocess.Popen[bytes],
        directory: Path,
        control: str,
        relay: str,
        *,
        ready_fd: int,
        stop_timeout_s: float,
    ) -> None:
        self.process = process
        self.directory = directory
        self.control = control
        self.relay = relay
        self.ready_fd = ready_fd  # -1 once read
        self.stop_timeout_s = stop_timeout_s

    @classmethod
    def start(cls, settings: Settings) -> StreamProcess:
        """A stream process, running."""
        directory = Path(tempfile.mkdtemp(prefix="pressloop-streams-"))  # mode 0700
        control_path = directory / "control.sock"
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        relay = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        ready = -1
        try:
            control.bind(str(control_path))
            control.listen(1024)
            relay.bind(("127.0.0.1", 0))
            relay.listen(1024)
            secret = secrets.token_urlsafe(24)
            ready, told = os.pipe()  # the stream process writes a byte once it serves
            command = [
                sys.executable,
                "-m",
                "pressloop.streamer",
                "--control-fd",
                str(control.fileno()),
                "--relay-fd",
                str(relay.fileno()),
                "--timeout",
                str(settings.provider_timeout_s),
                "--ready-fd",
                str(told),
            ]
            try:
                process = subprocess.Popen(
                    command,
                    pass_fds=(control.fileno(), relay.fileno(), told),
                    env={**os.environ, SECRET_ENV: secret},
                )
            finally:
                os.close(told)
            port = relay.getsockname()[1]
        except BaseException:
            if ready >= 0:
                os.close(ready)
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            # The stream process has them; copies kept here would keep them open after it ends.
            control.close()
            relay.close()
        relay_url = f"http://127.0.0.1:{port}/relay/{secret}"
        return cls(
            process,
            directory,
            str(control_path),
            relay_url,
            ready_fd=ready,
            stop_timeout_s=settings.stop_timeout_s,
        )

    def wait_ready(self, timeout_s: float) -> bool:
        """Until the stream process serves (True), ends or `timeout_s` passes (False)."""
        if self.ready_fd < 0:
            return True
        try:
            readable, _, _ = select.select([self.ready_fd], [], [], timeout_s)
            return bool(readable) and os.read(self.ready_fd, 1) == b"1"
        finally:
            os.close(self.ready_fd)
            self.ready_fd = -1

    def env(self) -> dict[str, str]:
        """What a serving process needs to hand its streams over to this one."""
        return {"PRESSLOOP_STREAMER_CONTROL": self.control, "PRESSLOOP_STREAMER_RELAY": self.relay}

    def pointed(self, settings: Settings) -> Settings:
        """`settings` of a serving process that hands its streams over to this one."""
        update = {"streamer_control": self.control, "streamer_relay": SecretStr(self.relay)}
        return settings.model_copy(update=update)

    def stop(self) -> None:
        """SIGTERM (it closes its streams), SIGKILL after PRESSLOOP_STOP_TIMEOUT."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.directory, ignore_errors=True)


class StreamProcesses:
    """One stream process a serving process: 200 streams' first tokens come together, and two
    processes take them on two cores at once."""

    def __init__(self, processes: list[StreamProcess]) -> None:
        self.processes = processes

    @classmethod
    def launch(cls, settings: Settings) -> StreamProcesses:
        """The stream processes, started together; their imports (about 1 s, 3 s on a slow CPU)
        go on while `pressloop serve` opens its own service, until `wait_ready`."""
        started: list[StreamProcess] = []
        try:
            for _ in range(settings.serve_processes):
                started.append(StreamProcess.start(settings))
        except BaseException:
            for process in started:
                process.stop()
            raise
        return cls(started)

    def wait_ready(self, timeout_s: float) -> None:
        """Until they serve, or given up waiting for after `timeout_s`
        (PRESSLOOP_STREAM_READY_TIMEOUT): a stream handed over sooner would wait for a stream
        process's imports and stay in its serving process instead; past it, `pressloop serve`
        goes on (each early stream falls back the same way)."""
        deadline = time.monotonic() + timeout_s
        for process in self.processes:
            if not process.wait_ready(max(0.0, deadline - time.monotonic())):
                logger.warning("a stream process is not serving yet: its first streams stay here")

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
