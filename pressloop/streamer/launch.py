"""Starting the stream process from `pressloop serve`'s first process (`PRESSLOOP_STREAM_PROCESS`).

The first process makes both of its sockets and passes them on, so their addresses are known
before the stream process runs: the unix socket for streams handed over (in a directory only
this user reads) and a loopback socket for relayed model calls, whose paths carry a secret the
serving processes are given and nobody else.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from pydantic import SecretStr

from pressloop.config import Settings
from pressloop.streamer.process import SECRET_ENV

STOP_GRACE_S = 10.0


class StreamProcess:
    def __init__(
        self, process: subprocess.Popen[bytes], directory: Path, control: str, relay: str
    ) -> None:
        self.process = process
        self.directory = directory
        self.control = control
        self.relay = relay

    @classmethod
    def start(cls, settings: Settings) -> StreamProcess:
        """A stream process, running."""
        directory = Path(tempfile.mkdtemp(prefix="pressloop-streams-"))  # mode 0700
        control_path = directory / "control.sock"
        control = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        relay = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            control.bind(str(control_path))
            control.listen(1024)
            relay.bind(("127.0.0.1", 0))
            relay.listen(1024)
            secret = secrets.token_urlsafe(24)
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
            ]
            process = subprocess.Popen(
                command,
                pass_fds=(control.fileno(), relay.fileno()),
                env={**os.environ, SECRET_ENV: secret},
            )
            port = relay.getsockname()[1]
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        finally:
            # The stream process has them; copies kept here would keep them open after it ends.
            control.close()
            relay.close()
        relay_url = f"http://127.0.0.1:{port}/relay/{secret}"
        return cls(process, directory, str(control_path), relay_url)

    def env(self) -> dict[str, str]:
        """What a serving process needs to hand its streams over to this one."""
        return {"PRESSLOOP_STREAMER_CONTROL": self.control, "PRESSLOOP_STREAMER_RELAY": self.relay}

    def pointed(self, settings: Settings) -> Settings:
        """`settings` of a serving process that hands its streams over to this one."""
        update = {"streamer_control": self.control, "streamer_relay": SecretStr(self.relay)}
        return settings.model_copy(update=update)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace_s)
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
    def start(cls, settings: Settings) -> StreamProcesses:
        started: list[StreamProcess] = []
        try:
            for _ in range(settings.serve_processes):
                started.append(StreamProcess.start(settings))
        except BaseException:
            for process in started:
                process.stop()
            raise
        return cls(started)

    def stop(self) -> None:
        for process in self.processes:
            process.stop()
