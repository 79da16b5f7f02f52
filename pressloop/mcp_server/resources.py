"""The MCP resources: what an outside agent may read (any role, viewers included), as JSON.

- `pressloop://approvals`: the pending approvals.
- `pressloop://threads`: the most recently active threads (each also listed on its own).
- `pressloop://threads/{thread_id}`: a thread, its messages and its runs.
- `pressloop://runs/{run_id}`: a run, its status, result and events.
"""

from __future__ import annotations

import re
from typing import Any

from mcp import types
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from pressloop.errors import NotFound
from pressloop.mcp_server.views import (
    approval_view,
    as_json,
    run_view,
    thread_detail_view,
    thread_view,
)
from pressloop.runtime.service import Service

SCHEME = "pressloop://"
APPROVALS = f"{SCHEME}approvals"
THREADS = f"{SCHEME}threads"
THREAD = re.compile(r"^pressloop://threads/([^/?#]+)$")
RUN = re.compile(r"^pressloop://runs/([^/?#]+)$")
JSON = "application/json"
# How many recent threads the list holds (and resources/list names one by one).
RECENT_THREADS = 20
EVENTS_SHOWN = 1000

FIXED = (
    types.Resource(
        name="approvals",
        title="Pending approvals",
        uri=APPROVALS,
        description="The steps waiting for a person's decision, soonest to expire first.",
        mime_type=JSON,
    ),
    types.Resource(
        name="threads",
        title="Recent threads",
        uri=THREADS,
        description=f"The {RECENT_THREADS} most recently active threads.",
        mime_type=JSON,
    ),
)

TEMPLATES = (
    types.ResourceTemplate(
        name="thread",
        title="A thread",
        uri_template=f"{SCHEME}threads/{{thread_id}}",
        description="A thread: its messages (the transcript) and its runs.",
        mime_type=JSON,
    ),
    types.ResourceTemplate(
        name="run",
        title="A run",
        uri_template=f"{SCHEME}runs/{{run_id}}",
        description="A run: its status, result (answer and steps), error and events.",
        mime_type=JSON,
    ),
)


class Resources:
    def __init__(self, service: Service) -> None:
        self.service = service

    async def listed(self) -> list[types.Resource]:
        threads = await self.service.list_threads(limit=RECENT_THREADS)
        return [
            *FIXED,
            *(
                types.Resource(
                    name=f"thread {t.id}",
                    title=t.title or t.id,
                    uri=f"{THREADS}/{t.id}",
                    mime_type=JSON,
                )
                for t in threads
            ),
        ]

    def templates(self) -> list[types.ResourceTemplate]:
        return list(TEMPLATES)

    async def read(self, uri: str) -> types.ReadResourceResult:
        try:
            content = await self._content(uri)
        except NotFound as missing:
            raise MCPError(
                code=INVALID_PARAMS, message=missing.message, data={"uri": uri}
            ) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=JSON, text=as_json(content))]
        )

    async def _content(self, uri: str) -> Any:
        if uri == APPROVALS:
            pending = await self.service.approvals.find(status="pending", limit=500)
            return [approval_view(a) for a in pending]
        if uri == THREADS:
            return [thread_view(t) for t in await self.service.list_threads(limit=RECENT_THREADS)]
        if found := THREAD.match(uri):
            detail = await self.service.thread_detail(found.group(1))
            return thread_detail_view(detail["thread"], detail["messages"], detail["runs"])
        if found := RUN.match(uri):
            run = await self.service.get_run(found.group(1))
            events = await self.service.events(run.id, limit=EVENTS_SHOWN)
            return run_view(run, events)
        raise NotFound(f"Pressloop has no resource {uri!r}")
