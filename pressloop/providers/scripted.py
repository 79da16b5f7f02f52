"""A provider that answers from a script: for demos, replays, tests and benchmarks.

The script is a JSON list, one item per model call, read in order:
  {"text": "..."}                                  a plain answer
  {"tool_calls": [{"name": "...", "arguments": {...}}], "text": "..."}   tool calls
  {"error": {"status": 503, "message": "..."}}     a provider failure (5xx/429 are retryable)
Any item may add "usage": {"input": N, "output": N} and "delay_s": seconds before answering.
The file may also be {"cycle": true, "answers": [...]} to repeat the answers forever, or
{"per_turn": true, "answers": [...]} to answer every turn with the script from its start: the
n-th model call of a turn gets the n-th answer, however many turns run at once (load tests).
When the list is used up the provider says so with a clear error instead of inventing answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from pressloop.clock import Sleep, real_sleep
from pressloop.contracts import ActionCall, Role, Usage
from pressloop.errors import ConfigurationError, ProviderError, ScriptExhausted
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
)


class ScriptedProvider:
    def __init__(
        self,
        items: Sequence[dict[str, Any]],
        *,
        model: str = "scripted",
        sleep: Sleep = real_sleep,
        chunk_chars: int = 16,
        cycle: bool = False,
        per_turn: bool = False,
        record: bool = True,
    ) -> None:
        self._items = [dict(item) for item in items]
        self._position = 0
        self._model = model
        self._sleep = sleep
        self._chunk_chars = chunk_chars
        self._cycle = cycle
        self._per_turn = per_turn
        self._record = record
        self.requests: list[ModelRequest] = []

    @classmethod
    def from_file(cls, path: Path | str | None, **kwargs: Any) -> ScriptedProvider:
        if path is None:
            raise ConfigurationError(
                "PRESSLOOP_PROVIDER=scripted needs PRESSLOOP_SCRIPT, the path of a JSON list of "
                'answers such as [{"text": "Hello"}]'
            )
        try:
            items = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigurationError(f"cannot read the script {path}: {exc}") from exc
        if isinstance(items, dict) and isinstance(items.get("answers"), list):
            # {"cycle": true, "answers": [...]} repeats the answers forever (demos, load tests).
            kwargs.setdefault("cycle", bool(items.get("cycle")))
            if items.get("per_turn"):
                # Load tests run thousands of turns: keeping every request would only leak.
                kwargs.setdefault("per_turn", True)
                kwargs.setdefault("record", False)
            items = items["answers"]
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise ConfigurationError(
                f"the script {path} must be a JSON list of objects, or "
                '{"cycle": true, "answers": [...]}'
            )
        return cls(items, **kwargs)

    @property
    def name(self) -> str:
        return "scripted"

    @property
    def model(self) -> str:
        return self._model

    @property
    def supports_tools(self) -> bool:
        return True

    @property
    def remaining(self) -> int:
        return len(self._items) - self._position

    def _next_item(self) -> dict[str, Any]:
        if self._position >= len(self._items):
            if not self._cycle or not self._items:
                raise ScriptExhausted(
                    f"the scripted provider has used all {len(self._items)} answers of its "
                    "script; add more items to PRESSLOOP_SCRIPT",
                    retryable=False,
                )
            self._position = 0
        item = self._items[self._position]
        self._position += 1
        return item

    def _turn_item(self, request: ModelRequest) -> dict[str, Any]:
        """The answer for this call of its turn: one per assistant message since the person's
        (or the heartbeat's) last message."""
        calls = 0
        for message in reversed(request.messages):
            opens_turn = not message.content.startswith("ACTION_RESULTS:")  # JSON protocol
            if message.role is Role.USER and message.name is None and opens_turn:
                break
            calls += message.role is Role.ASSISTANT
        if not self._items:
            raise ScriptExhausted("the script has no answers", retryable=False)
        return self._items[calls % len(self._items)]

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self._record:
            self.requests.append(request)
        item = self._turn_item(request) if self._per_turn else self._next_item()
        delay = float(item.get("delay_s", 0) or 0)
        if delay:
            await self._sleep(delay)
        error = item.get("error")
        if error is not None:
            status = int(error.get("status", 500)) if isinstance(error, dict) else 500
            message = error.get("message", "scripted failure") if isinstance(error, dict) else error
            raise ProviderError(
                f"scripted provider answered {status}: {message}",
                retryable=status == 429 or status >= 500,
            )
        text = str(item.get("text", ""))
        calls = [
            ActionCall(
                id=str(call.get("id") or f"call_{uuid.uuid4().hex[:12]}"),
                name=str(call.get("name", "")),
                params=call.get("arguments") if isinstance(call.get("arguments"), dict) else {},
            )
            for index, call in enumerate(item.get("tool_calls") or [])
        ]
        usage_spec = item.get("usage") or {}
        # A rough count (4 chars a token) so usage and budgets behave as with a real model.
        prompt_chars = len(request.system) + sum(len(m.content) for m in request.messages)
        answer_chars = len(text) + len(json.dumps(item.get("tool_calls") or []))
        usage = Usage(
            input_tokens=int(usage_spec.get("input", max(1, prompt_chars // 4))),
            output_tokens=int(usage_spec.get("output", max(1, answer_chars // 4))),
            model_calls=1,
        )
        return ModelResponse(
            text=text,
            tool_calls=calls,
            usage=usage,
            finish_reason="tool_calls" if calls else "stop",
            model=self._model,
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        response = await self.complete(request)
        text = response.text
        for start in range(0, len(text), self._chunk_chars):
            yield TextDelta(text=text[start : start + self._chunk_chars])
        yield ResponseDone(response=response)
