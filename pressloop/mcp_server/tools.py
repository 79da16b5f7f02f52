"""The MCP tools: `chat`, every action of the catalog, and the approval tools.

- `chat` {message, thread_id?} runs a turn on the thread (a new one without `thread_id`) under
  trigger `mcp` for the caller, and answers once the run rests (at most PRESSLOOP_MCP_CALL_WAIT).
- An action tool runs exactly that action, without the model, through the executor under the
  `mcp` policy (read allowed; write and destructive wait for a person): `Service.call_action`.
- `list_approvals`, `approve`, `reject`: the approval queue. Deciding needs an admin, so an agent
  connected with an operator token cannot approve its own calls.

A run-backed tool answers the run's answer, "waiting for approval <id>" when it waits for a
person, or "still running: run <id>" past the wait; its structured content carries the status,
thread and run ids. A refused, invalid or failed call is a tool error (`isError`) whose text
says why: the client's model reads it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import types
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pressloop.actions.executor import validation_message
from pressloop.contracts import CatalogEntry, Risk, RunStatus, StepStatus, Trigger
from pressloop.errors import PressloopError
from pressloop.mcp_server.caller import Caller
from pressloop.mcp_server.views import approval_view, as_json
from pressloop.runtime.service import Service
from pressloop.runtime.service_reads import RESTING
from pressloop.store.records import RunRecord

log = logging.getLogger(__name__)

CHAT = "chat"
LIST_APPROVALS = "list_approvals"
APPROVE = "approve"
REJECT = "reject"
BUILT_IN = frozenset({CHAT, LIST_APPROVALS, APPROVE, REJECT})


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ChatArgs(Arguments):
    message: str = Field(min_length=1, description="What to say to Pressloop's agent.")
    thread_id: str | None = Field(
        default=None,
        description="Continue this thread (the thread_id of an earlier answer); none: a new one.",
    )


class ListApprovalsArgs(Arguments):
    limit: int = Field(default=50, ge=1, le=500, description="At most this many.")


class ApproveArgs(Arguments):
    approval_id: str = Field(min_length=1, description="The approval to approve (apr_...).")
    note: str | None = Field(default=None, max_length=2000, description="Kept with the decision.")
    params: dict[str, Any] | None = Field(
        default=None, description="Run the step with these params instead of the asked ones."
    )


class RejectArgs(Arguments):
    approval_id: str = Field(min_length=1, description="The approval to reject (apr_...).")
    note: str | None = Field(default=None, max_length=2000, description="Told to the agent.")


# What every run-backed tool (chat, an action, approve, reject) returns as structured content.
RUN_REPLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "description": "The text the tool answered."},
        "status": {
            "type": "string",
            "description": "The run's status: succeeded, waiting_approval, running, failed, ...",
        },
        "thread_id": {"type": "string"},
        "run_id": {"type": "string"},
        "approval_id": {
            "type": ["string", "null"],
            "description": "With waiting_approval: the approval the run waits for.",
        },
    },
    "required": ["answer", "status", "thread_id", "run_id"],
}


def _input_schema(model: type[Arguments]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def risk_annotations(risk: Risk) -> types.ToolAnnotations:
    """read: read-only; write: changes, not destructively; destructive: may destroy."""
    if risk is Risk.READ:
        return types.ToolAnnotations(read_only_hint=True)
    return types.ToolAnnotations(read_only_hint=False, destructive_hint=risk is Risk.DESTRUCTIVE)


BUILT_IN_TOOLS = (
    types.Tool(
        name=CHAT,
        description="Send a message to Pressloop's WordPress agent and get its answer. It acts "
        "on the site under the `mcp` policy: every change waits for a person's approval (the "
        "answer then says `waiting for approval <id>`). Continue a conversation with thread_id.",
        input_schema=_input_schema(ChatArgs),
        output_schema=RUN_REPLY_SCHEMA,
        # The agent may reach any action of the catalog (each through the policy).
        annotations=types.ToolAnnotations(
            read_only_hint=False, destructive_hint=True, open_world_hint=True
        ),
    ),
    types.Tool(
        name=LIST_APPROVALS,
        description="The steps waiting for a person's decision (pending approvals), soonest to "
        "expire first.",
        input_schema=_input_schema(ListApprovalsArgs),
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=APPROVE,
        description="Approve a pending step (optionally with edited params): it runs and its "
        "run resumes. Admin tokens only.",
        input_schema=_input_schema(ApproveArgs),
        output_schema=RUN_REPLY_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=True),
    ),
    types.Tool(
        name=REJECT,
        description="Reject a pending step: it does not run; the agent is told and its run "
        "resumes. Admin tokens only.",
        input_schema=_input_schema(RejectArgs),
        output_schema=RUN_REPLY_SCHEMA,
        annotations=types.ToolAnnotations(read_only_hint=False, destructive_hint=False),
    ),
)


def action_tool(entry: CatalogEntry) -> types.Tool:
    return types.Tool(
        name=entry.name,
        description=f"{entry.description} (Pressloop action, risk: {entry.risk.value}; runs "
        "under the `mcp` policy: a write or destructive call waits for a person's approval.)",
        input_schema=entry.params_schema,
        output_schema=RUN_REPLY_SCHEMA,
        annotations=risk_annotations(entry.risk),
    )


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


class Tools:
    """The tool list and its dispatch over one Service; the caller comes with each call."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def _actions(self) -> dict[str, CatalogEntry]:
        # A built-in name wins over an action of the same name (none has one today). Outside
        # MCP servers' tools are not passed on: a client reaches those servers itself, and a
        # Pressloop configured as its own outside server would call itself in a loop.
        return {
            e.name: e
            for e in self.service.registry.catalog()
            if e.name not in BUILT_IN and e.server is None
        }

    def listed(self) -> list[types.Tool]:
        return [*BUILT_IN_TOOLS, *(action_tool(e) for e in self._actions().values())]

    async def call(
        self, caller: Caller, name: str, arguments: dict[str, Any] | None
    ) -> types.CallToolResult:
        arguments = arguments or {}
        handlers: dict[str, Callable[[Caller, dict[str, Any]], Awaitable[types.CallToolResult]]]
        handlers = {
            CHAT: self._chat,
            LIST_APPROVALS: self._list_approvals,
            APPROVE: self._approve,
            REJECT: self._reject,
        }
        try:
            if name in handlers:
                return await handlers[name](caller, arguments)
            if name in self._actions():
                return await self._action(caller, name, arguments)
            return tool_error(f"Pressloop has no tool named {name!r}")
        except ValidationError as invalid:
            return tool_error(f"invalid arguments for {name}: {validation_message(invalid)}")
        except PressloopError as problem:
            return tool_error(problem.message)

    # Run-backed tools ----------------------------------------------------------------------

    async def _chat(self, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
        if refusal := caller.refusal("operator", "chat"):
            return tool_error(refusal)
        args = ChatArgs.model_validate(arguments)
        thread_id = args.thread_id
        if thread_id is None:
            await self.service.check_enabled()  # the kill switch: refused before a thread is made
            thread = await self.service.create_thread(
                title=args.message[:80], created_by=caller.name
            )
            thread_id = thread.id
        submission = await self.service.submit(
            thread_id, args.message, trigger=Trigger.MCP, user=caller.name, start_here=True
        )
        return await self._run_reply(submission.run.id)

    async def _action(
        self, caller: Caller, name: str, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        if refusal := caller.refusal("operator", f"calling the action {name}"):
            return tool_error(refusal)
        submission = await self.service.call_action(
            name, arguments, user=caller.name, trigger=Trigger.MCP, thread_id=None, start_here=True
        )
        return await self._run_reply(submission.run.id)

    async def _run_reply(self, run_id: str, *, decided: str = "") -> types.CallToolResult:
        run = await self.service.wait(run_id, timeout_s=self.service.settings.mcp_call_wait_s)
        return await self.present(run, decided=decided)

    async def present(self, run: RunRecord, *, decided: str = "") -> types.CallToolResult:
        """The run as a tool result: its answer, or what it waits for, or why it failed (a tool
        error, except after a decision: `decided` says what was decided, which succeeded)."""
        result = run.result
        text = result.assistant_text if result is not None else ""
        approval_id: str | None = None
        failed = False
        if run.status is RunStatus.SUCCEEDED:
            answer = text
        elif run.status is RunStatus.WAITING_APPROVAL:
            approval_id = await self._pending_approval(run)
            answer = f"waiting for approval {approval_id or '(see list_approvals)'}"
            answer += f"\n\n{text}" if text else ""
        elif run.status not in RESTING:
            answer = f"still running: run {run.id} ({run.status.value})"
            if run.status is RunStatus.QUEUED and run.error is not None:
                answer += f"; it waits for a retry after: {run.error.message}"
        else:
            failed = True
            error = run.error or (result.error if result is not None else None)
            answer = f"run {run.id} {run.status.value}: {error.message if error else text}"
        if decided:
            answer, failed = f"{decided}; the run: {answer}", False
        reply = {
            "answer": answer,
            "status": run.status.value,
            "thread_id": run.thread_id,
            "run_id": run.id,
            "approval_id": approval_id,
        }
        return types.CallToolResult(
            content=[
                types.TextContent(text=answer),
                types.TextContent(text=f"thread_id: {run.thread_id}\nrun_id: {run.id}"),
            ],
            structured_content=reply,
            is_error=failed,
        )

    async def _pending_approval(self, run: RunRecord) -> str | None:
        """The approval the run waits for: its step's, else the pending one of the run."""
        steps = run.result.steps if run.result is not None else []
        for step in reversed(steps):
            if step.status is StepStatus.PENDING_APPROVAL and step.approval_id:
                return step.approval_id
        for approval in await self.service.approvals.find(status="pending", limit=500):
            if approval.run_id == run.id:
                return approval.id
        return None

    # Approvals -----------------------------------------------------------------------------

    async def _list_approvals(
        self, _caller: Caller, arguments: dict[str, Any]
    ) -> types.CallToolResult:
        args = ListApprovalsArgs.model_validate(arguments)
        pending = await self.service.approvals.find(status="pending", limit=args.limit)
        views = [approval_view(a) for a in pending]
        text = as_json(views) if views else "no approval is pending"
        return types.CallToolResult(
            content=[types.TextContent(text=text)], structured_content={"approvals": views}
        )

    async def _approve(self, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
        if refusal := _decision_refusal(caller, "approving"):
            return tool_error(refusal)
        args = ApproveArgs.model_validate(arguments)
        decided = await self.service.decide(
            args.approval_id, approve=True, by=caller.name, note=args.note, params=args.params
        )
        self.service.start_run_soon(decided.run_id)
        return await self._run_reply(decided.run_id, decided=f"approved {decided.id}")

    async def _reject(self, caller: Caller, arguments: dict[str, Any]) -> types.CallToolResult:
        if refusal := _decision_refusal(caller, "rejecting"):
            return tool_error(refusal)
        args = RejectArgs.model_validate(arguments)
        decided = await self.service.decide(
            args.approval_id, approve=False, by=caller.name, note=args.note
        )
        self.service.start_run_soon(decided.run_id)
        return await self._run_reply(decided.run_id, decided=f"rejected {decided.id}")


def _decision_refusal(caller: Caller, what: str) -> str | None:
    refusal = caller.refusal("admin", what)
    if refusal is None:
        return None
    return f"{refusal} (an agent may not decide the approvals of its own calls)"
