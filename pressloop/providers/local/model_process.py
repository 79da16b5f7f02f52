"""The service's side of the local model's own process (`model_server.py`).

`ModelProcess.call` sends one request and waits for its answer; it is blocking and called from
the provider's single worker thread, so requests reach the model one at a time, in order. The
process is started on the first request and again after it stopped: a crash, an illegal
instruction or an out-of-memory kill becomes a retryable `ProviderError` that says so ("the local
model process stopped: ..."), and the next request starts a new process. `stop(ticket)` stops
the request in flight at once (a cancelled run), by ending the process: llama.cpp has no way to
interrupt a prompt being read, and a new process restores the saved prompt state in about a
second.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from typing import IO, Any

from pressloop.errors import ProviderError
from pressloop.providers.local.options import ModelOptions, options_to_json

log = logging.getLogger("pressloop.local_model")

# What a signal that ended the model process most likely means, for the run's error.
_SIGNAL_MEANING = {
    signal.SIGILL: "an illegal instruction (llama.cpp was built for another CPU)",
    signal.SIGKILL: "killed (out of memory, or by hand)",
    signal.SIGSEGV: "a crash in llama.cpp",
    signal.SIGBUS: "a crash in llama.cpp (bus error: is the model file still there?)",
    signal.SIGABRT: "llama.cpp aborted",
    signal.SIGTERM: "terminated",
}


class _Stopped(Exception):
    """The process ended before answering."""


class ModelProcess:
    def __init__(self, options: ModelOptions, *, start_timeout_s: float = 120.0) -> None:
        self._options = options
        self._start_timeout_s = start_timeout_s
        self._process: subprocess.Popen[bytes] | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        self._guard = threading.Lock()  # between the worker thread and stop()/close()
        self._running: object | None = None  # the ticket of the request in flight
        self._stopping = False  # the process was ended on purpose (a cancelled request)
        self._next_id = 0
        self.starts = 0  # processes started so far
        self.ready: dict[str, Any] = {}  # the current process's hello: pid, CPU backend

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def call(self, op: str, params: dict[str, Any], ticket: object = None) -> dict[str, Any]:
        """Send one request and return its result; starts the process when there is none."""
        with self._guard:
            self._running = ticket
            self._stopping = False
        try:
            process = self._ensure_started()
            self._next_id += 1
            line = json.dumps({"id": self._next_id, "op": op, "params": params})
            try:
                assert process.stdin is not None
                process.stdin.write(line.encode() + b"\n")
                process.stdin.flush()
                answer = self._read(process, timeout_s=None)
            except (_Stopped, OSError):
                raise self._stopped_error(process) from None
            return self._result(answer)
        finally:
            with self._guard:
                self._running = None

    def stop(self, ticket: object) -> bool:
        """End the process if the request in flight is `ticket`'s (thread-safe); True if so."""
        with self._guard:
            if ticket is None or self._running is not ticket or self._process is None:
                return False
            self._stopping = True
            with contextlib.suppress(OSError):
                self._process.kill()
            return True

    def close(self) -> None:
        """End the process: stdin closed (it exits when idle), killed if it does not."""
        with self._guard:
            process, self._process = self._process, None
        if process is None:
            return
        with contextlib.suppress(OSError):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self._close_pipes(process)

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        process = self._process
        if process is not None and process.poll() is None:
            return process
        if process is not None:
            self._close_pipes(process)
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pressloop.providers.local.model_server",
                options_to_json(self._options),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        with self._guard:
            self._process = process
        self.starts += 1
        self._stderr.clear()
        threading.Thread(
            target=self._drain, args=(process.stderr,), name="pressloop-llama-stderr", daemon=True
        ).start()
        try:
            hello = self._read(process, timeout_s=self._start_timeout_s)
        except _Stopped:
            raise self._stopped_error(process, starting=True) from None
        if not hello.get("ok"):
            process.wait(timeout=10)
            error = hello.get("error") or {}
            raise ProviderError(
                f"the local model process could not start: {error.get('message')}",
                retryable=False,
            )
        self.ready = hello.get("result") or {}
        log.info("local model process %s started: %s", process.pid, self.ready.get("backend"))
        return process

    def _read(self, process: subprocess.Popen[bytes], *, timeout_s: float | None) -> Any:
        stdout = process.stdout
        assert stdout is not None
        if timeout_s is not None:
            ready, _, _ = select.select([stdout], [], [], timeout_s)
            if not ready:
                process.kill()
                raise ProviderError(
                    f"the local model process did not start within {timeout_s:.0f} s "
                    "(PRESSLOOP_LOCAL_START_TIMEOUT)",
                    retryable=True,
                )
        line = stdout.readline()
        if not line:
            raise _Stopped
        return json.loads(line)

    def _result(self, answer: dict[str, Any]) -> dict[str, Any]:
        if answer.get("ok"):
            result: dict[str, Any] = answer.get("result") or {}
            return result
        error = answer.get("error") or {}
        raise ProviderError(
            str(error.get("message") or "the local model failed"),
            retryable=bool(error.get("retryable")),
        )

    def _stopped_error(
        self, process: subprocess.Popen[bytes], *, starting: bool = False
    ) -> ProviderError:
        try:
            code = process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        time.sleep(0.05)  # let the stderr reader take the last lines
        if self._stopping:
            return ProviderError("the local model's answer was cancelled", retryable=False)
        what = _how_it_ended(code)
        tail = " | ".join(line for line in list(self._stderr)[-3:] if line)
        message = (
            f"the local model process stopped{' while starting' if starting else ''}: {what}; "
            "the next decision starts a new one"
        )
        if tail:
            message += f" (its last output: {tail[-400:]})"
        log.warning("%s", message)
        return ProviderError(message, retryable=True)

    def _drain(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        for raw in iter(stream.readline, b""):
            line = raw.decode(errors="replace").rstrip()
            self._stderr.append(line)
            log.debug("local model: %s", line)
        stream.close()

    @staticmethod
    def _close_pipes(process: subprocess.Popen[bytes]) -> None:
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _how_it_ended(code: int) -> str:
    if code >= 0:
        return f"exit status {code}"
    try:
        ended_by = signal.Signals(-code)
    except ValueError:
        return f"signal {-code}"
    return f"{ended_by.name}, {_SIGNAL_MEANING.get(ended_by, 'a signal')}"
