"""The minimal HTTP serving path for the peers that have none of their own here (workload 3).

None of the three peers serves HTTP from the packages compared (LangGraph's server is the
separate LangGraph Platform / `langgraph-api`; the Agents SDK and Pydantic AI are libraries), so
each is put behind this same FastAPI app, served by uvicorn like `pressloop serve` (httptools,
uvloop), with SSE from
sse-starlette like Pressloop's API:

    POST /threads                      -> {"id": ...}
    POST /threads/{id}/runs {message}  -> SSE: one `message` frame per text delta, then `done`

A frame is sent the moment the system yields its delta: nothing is stored on the way (Pressloop
stores every event before its frame, so a client can resume a stream; these cannot).

    python -m bench.peers.sse_app --system langgraph --target '{...}' --port 8801
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
import uvloop
from fastapi import FastAPI
from pydantic import BaseModel
from sse_starlette import EventSourceResponse, ServerSentEvent

from bench.peers.system import System, Target, load


class RunBody(BaseModel):
    message: str


def create_app(system: System, target: Target) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        await system.open(target)
        try:
            yield
        finally:
            await system.close()

    app = FastAPI(lifespan=lifespan)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/threads", status_code=201)
    async def new_thread() -> dict[str, str]:
        return {"id": await system.new_thread()}

    @app.post("/threads/{thread_id}/runs")
    async def run(thread_id: str, body: RunBody) -> EventSourceResponse:
        async def frames() -> AsyncIterator[ServerSentEvent]:
            seq = 0
            async for delta in system.stream(thread_id, body.message):
                seq += 1
                yield ServerSentEvent(
                    data=json.dumps({"delta": delta}), event="message", id=str(seq)
                )
            yield ServerSentEvent(data="{}", event="done", id=str(seq + 1))

        return EventSourceResponse(frames())

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description="A peer behind a minimal FastAPI SSE endpoint.")
    parser.add_argument("--system", required=True)
    parser.add_argument("--target", required=True, help="a Target as JSON")
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()
    app = create_app(load(options.system), Target(**json.loads(options.target)))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=options.port, log_level="warning")
    )
    # On uvloop with uvicorn's httptools parser, as `pressloop serve` runs.
    uvloop.run(server.serve())


if __name__ == "__main__":
    main()
