"""The local model's own process: `python -m pressloop.providers.local.model_server OPTIONS`.

The service never loads llama.cpp itself: a library that dies (an illegal instruction on a CPU
it was not built for, a crash in native code, the kernel's out-of-memory killer) would take every
thread, stream and run of the service with it. This process loads the model and answers one
request at a time; `model_process.ModelProcess` starts it, talks to it and starts a new one when
it stops.

The protocol is one JSON object a line: requests `{"id", "op", ...}` on stdin, answers `{"id",
"ok": true, "result"}` or `{"id", "ok": false, "error": {"message", "retryable"}}` on the
process's original stdout. The first answer (id 0, unasked) says the process is ready and which
CPU backend it loaded. Anything else written to stdout (by llama.cpp or a library) goes to stderr
instead, so it can never be taken for an answer. Stdin closing (the service stopped) ends it.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict
from typing import Any, TextIO

from pressloop.contracts import Message
from pressloop.errors import PressloopError, ProviderError
from pressloop.providers.base import ModelRequest
from pressloop.providers.local.backends import system_info
from pressloop.providers.local.messages import stable_count, to_messages
from pressloop.providers.local.model import LocalModel
from pressloop.providers.local.options import ModelOptions, options_from_json
from pressloop.providers.local.prompt_state import prompt_state


class ModelServer:
    """What each request does, on the one model of this process."""

    def __init__(self, model: LocalModel) -> None:
        self.model = model

    def handle(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        if op == "load":
            self.model.load()
            return {"seconds": self.model.load_seconds}
        if op == "generate":
            return self._generate(params)
        if op == "grammar":
            self.model.grammar(params["schema_json"])  # built and checked by llama.cpp
            return {}
        if op == "prompt_state":
            return self._prompt_state(params["system"])
        if op == "info":
            return {
                "backend": self.model.backend.as_dict(),
                "system_info": system_info(),
                "load_seconds": self.model.load_seconds,
            }
        raise ProviderError(f"the local model process has no operation {op!r}", retryable=False)

    def _generate(self, params: dict[str, Any]) -> dict[str, Any]:
        request = ModelRequest(
            system=params["system"],
            messages=[Message.model_validate(m) for m in params["messages"]],
        )
        messages = to_messages(request, late_system=self.model.takes_late_system())
        generation = self.model.generate(
            [{"role": m["role"], "content": m["content"]} for m in messages],
            schema_json=params.get("schema_json"),
            max_tokens=int(params["max_tokens"]),
            stable=stable_count(messages),
        )
        prefixes = self.model.prefixes
        return {
            "generation": asdict(generation),
            "prefix_restored": self.model.prefix_restored,
            "prefix_refused": prefixes.refused if prefixes is not None else None,
        }

    def _prompt_state(self, system: str) -> dict[str, Any]:
        found = prompt_state(self.model, system)
        return {
            "path": str(found.path) if found.path else None,
            "tokens": found.tokens,
            "present": found.present,
            "stale": found.stale,
        }


def _send(channel: TextIO, answer: dict[str, Any]) -> None:
    channel.write(json.dumps(answer) + "\n")
    channel.flush()


def _failure(request_id: object, problem: BaseException) -> dict[str, Any]:
    if isinstance(problem, PressloopError):
        message = problem.message
        retryable = bool(getattr(problem, "retryable", False))
    else:  # a bug, or llama.cpp raising something of its own: reported, the process goes on
        message = f"{type(problem).__name__}: {problem}"
        retryable = False
    return {"id": request_id, "ok": False, "error": {"message": message, "retryable": retryable}}


def serve(options: ModelOptions, requests: TextIO, channel: TextIO) -> int:
    try:
        server = ModelServer(LocalModel(options))  # loads llama.cpp's CPU backend
    except Exception as problem:  # noqa: BLE001 (told to the service, which explains it)
        _send(channel, _failure(0, problem))
        return 1
    ready = {"backend": server.model.backend.as_dict(), "pid": os.getpid()}
    _send(channel, {"id": 0, "ok": True, "result": ready})
    for line in requests:
        request_id: object = None
        try:
            request = json.loads(line)
            request_id = request.get("id")
            result = server.handle(str(request["op"]), request.get("params") or {})
            answer: dict[str, Any] = {"id": request_id, "ok": True, "result": result}
        except Exception as problem:  # noqa: BLE001 (one bad request does not end the process)
            answer = _failure(request_id, problem)
        _send(channel, answer)
    server.model.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(
            "usage: python -m pressloop.providers.local.model_server OPTIONS_JSON", file=sys.stderr
        )
        return 2
    # The answers go on a private copy of stdout; stdout itself becomes stderr, so whatever
    # native code prints cannot corrupt them.
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(options_from_json(argv[0]), sys.stdin, channel)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
