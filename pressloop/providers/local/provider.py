"""`PRESSLOOP_PROVIDER=local`: a GGUF model in-process through llama.cpp, fully offline.

The model has no native tool calling, so the engine speaks the JSON decision protocol to it and
sends the decision schema in `ModelRequest.response_schema`; here that schema becomes a grammar,
so every complete answer is a valid decision. One model object serves one request at a time: a
single worker thread runs llama.cpp (the event loop stays free), the requests queue in front of
it, and llama.cpp uses every core for that one request.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pressloop.contracts import Message, Role, Usage
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
)
from pressloop.providers.local.catalog import example_turns, split_system
from pressloop.providers.local.model import Generation, LocalModel
from pressloop.providers.local.schema import (
    action_names,
    fallback_answer,
    grammar_schema,
    problem_with,
)


class LocalProvider:
    def __init__(self, model: LocalModel, *, name: str, max_tokens: int) -> None:
        self._model = model
        self._name = name
        self._max_tokens = max_tokens
        # The single worker thread is the queue: requests run one at a time, in arrival order,
        # and a request cancelled while it waits is dropped before it starts.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pressloop-llama")
        self.last: Generation | None = None

    @property
    def name(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self._name

    @property
    def supports_tools(self) -> bool:
        # No native tool calls: the engine uses the JSON decision protocol with a schema.
        return False

    @property
    def local_model(self) -> LocalModel:
        return self._model

    async def load(self) -> float:
        """Load the model now (instead of on the first request); returns the seconds it took."""
        await self._in_thread(self._model.load)
        return self._model.load_seconds or 0.0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        schema = grammar_schema(request.response_schema) if request.response_schema else None
        schema_json = json.dumps(schema, sort_keys=False) if schema else None
        max_tokens = min(request.max_output_tokens or self._max_tokens, self._max_tokens)
        generation = await self._in_thread(self._generate, request, schema_json, max_tokens)
        self.last = generation
        text = generation.text
        if schema is not None:
            problem = problem_with(text, action_names(schema))
            if problem is not None:
                text = fallback_answer(problem)
        return ModelResponse(
            text=text,
            usage=Usage(
                input_tokens=generation.prompt_tokens,
                output_tokens=generation.completion_tokens,
                model_calls=1,
            ),
            finish_reason=generation.finish_reason,
            model=self._name,
        )

    def _generate(
        self, request: ModelRequest, schema_json: str | None, max_tokens: int
    ) -> Generation:
        messages = to_messages(request, late_system=self._model.takes_late_system())
        return self._model.generate(
            [{"role": m["role"], "content": m["content"]} for m in messages],
            schema_json=schema_json,
            max_tokens=max_tokens,
            stable=stable_count(messages),
        )

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        # A decision is read whole (the engine streams no JSON-protocol text), so the answer is
        # generated at once and handed over as one delta.
        response = await self.complete(request)
        if response.text:
            yield TextDelta(text=response.text)
        yield ResponseDone(response=response)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def aclose(self) -> None:
        self.close()

    async def _in_thread(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: function(*args, **kwargs))


def to_messages(request: ModelRequest, *, late_system: bool = True) -> list[dict[str, str]]:
    """Chat messages for the model's own chat template: the system prompt's stable part, the
    worked examples, the rest of the system prompt (site, memories: as a second system message
    when the template takes one, `late_system`), then the transcript."""
    head, tail = split_system(request.system)
    if tail and not late_system:
        head, tail = f"{head}\n\n{tail}", ""
    out = [{"role": "system", "content": head}] if head else []
    out += example_turns(head)
    if tail:
        out.append({"role": "system", "content": tail})
    for message in request.messages:
        out.append({"role": _role(message), "content": message.content})
    return out


def _role(message: Message) -> str:
    # The JSON protocol renders action results as user messages; a stray tool message is read
    # the same way, since the chat template has no tool role without tools.
    return "assistant" if message.role is Role.ASSISTANT else "user"


def stable_count(messages: list[dict[str, str]]) -> int:
    """How many leading messages are the same for every request: the system prompt's stable
    part and the worked examples."""
    return 1 + sum(1 for m in messages[1:] if m.get("example"))
