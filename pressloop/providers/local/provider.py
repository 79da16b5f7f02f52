"""`PRESSLOOP_PROVIDER=local`: a GGUF model through llama.cpp, fully offline, in its own process.

The model has no native tool calling, so the engine speaks the JSON decision protocol to it and
sends the decision schema in `ModelRequest.response_schema`; the model process turns that schema
into a grammar, so every complete answer is a valid decision. The model runs in a process of its
own (`model_process.py`): if llama.cpp dies, the run gets a retryable error and the service goes
on. One request at a time: a single worker thread talks to the process (the event loop stays
free), the requests queue in front of it, and llama.cpp uses every core for that one request. A
request whose run is cancelled is dropped while it waits, and stopped while it runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pressloop.contracts import Role, Usage
from pressloop.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamPart,
    TextDelta,
)
from pressloop.providers.local.generation import Generation
from pressloop.providers.local.grounding import (
    drop_unsaid,
    ground_references,
    seen_ids,
    typed_by_words,
    whole_quotes,
)
from pressloop.providers.local.model_process import ModelProcess
from pressloop.providers.local.schema import (
    action_names,
    fallback_answer,
    grammar_schema,
    problem_with,
)


class LocalProvider:
    def __init__(self, process: ModelProcess, *, name: str, max_tokens: int) -> None:
        self._process = process
        self._name = name
        self._max_tokens = max_tokens
        # The single worker thread is the queue: requests run one at a time, in arrival order,
        # and a request cancelled while it waits is dropped before it starts.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pressloop-llama")
        self.last: Generation | None = None
        self.prefix_restored = 0  # the model process's restores of a saved prompt state
        self.prefix_refused: str | None = None  # why the last saved state found was refused

    @property
    def name(self) -> str:
        return "local"

    @property
    def model(self) -> str:
        return self._name

    @property
    def answers_from_results(self) -> bool:
        # A round of successful writes ends with Pressloop's account of them, not another
        # answer of several seconds that may claim what did not happen (engine/grounded.py).
        return True

    @property
    def supports_tools(self) -> bool:
        # No native tool calls: the engine uses the JSON decision protocol with a schema.
        return False

    @property
    def process(self) -> ModelProcess:
        return self._process

    async def load(self) -> float:
        """Load the model now (instead of on the first request); returns the seconds it took."""
        result = await self._call("load", {})
        return float(result.get("seconds") or 0.0)

    async def info(self) -> dict[str, Any]:
        """The model process's CPU backend, llama.cpp's system info, its load time."""
        return await self._call("info", {})

    async def prompt_state(self, system: str) -> dict[str, Any]:
        """Whether the state of this system prompt (the default catalog's, as the caller built
        it) is saved and loadable here."""
        return await self._call("prompt_state", {"system": system})

    async def check_grammar(self, schema: dict[str, Any]) -> None:
        """Have llama.cpp build the decision grammar of `schema` (raises if it refuses it)."""
        await self._call("grammar", {"schema_json": json.dumps(grammar_schema(schema))})

    async def complete(self, request: ModelRequest) -> ModelResponse:
        schema = grammar_schema(request.response_schema) if request.response_schema else None
        if schema is not None:
            # Reference fields take an id the conversation shows, or words (grounding.py).
            schema = ground_references(schema, seen_ids(m.content for m in request.messages))
        max_tokens = min(request.max_output_tokens or self._max_tokens, self._max_tokens)
        result = await self._call(
            "generate",
            {
                "system": request.system,
                "messages": [m.model_dump(mode="json") for m in request.messages],
                "schema_json": json.dumps(schema, sort_keys=False) if schema else None,
                "max_tokens": max_tokens,
            },
        )
        generation = Generation(**result["generation"])
        self.last = generation
        self.prefix_restored = int(result.get("prefix_restored") or 0)
        self.prefix_refused = result.get("prefix_refused")
        text = generation.text
        if schema is not None:
            problem = problem_with(text, action_names(schema))
            if problem is not None:
                text = fallback_answer(problem)
            else:
                # The schema with its descriptions: a field's label is no value for it.
                said = _said(request)
                text = drop_unsaid(text, request.response_schema or schema, said)
                text = whole_quotes(text, said)
                text = typed_by_words(text, request.response_schema or schema, said)
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

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamPart]:
        # A decision is read whole (the engine streams no JSON-protocol text), so the answer is
        # generated at once and handed over as one delta.
        response = await self.complete(request)
        if response.text:
            yield TextDelta(text=response.text)
        yield ResponseDone(response=response)

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._process.close()

    async def aclose(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self._process.close)

    async def _call(self, op: str, params: dict[str, Any]) -> dict[str, Any]:
        ticket = object()  # which request is in flight, so a cancel stops only its own
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._executor, self._process.call, op, params, ticket)
        try:
            return await future
        except asyncio.CancelledError:
            # Queued: the executor drops it. Running: the model process is ended now, and
            # the next request starts a new one.
            self._process.stop(ticket)
            raise


def _said(request: ModelRequest) -> str:
    """The person's own words in the conversation (not the action results sent as user
    messages in the JSON protocol)."""
    return "\n".join(
        m.content
        for m in request.messages
        if m.role is Role.USER and not m.content.startswith("ACTION_RESULTS:")
    )
