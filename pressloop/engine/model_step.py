"""CallModel: build the prompt, ask the model (streaming), normalise its answer to a plan.

An unusable answer gets one corrective retry; the second unusable answer ends the turn with a
clear error. The corrective exchange is not kept in the transcript. Secret params of the plan's
calls are held in memory (`TurnState.secrets`); the transcript, the checkpoint and the events
get the redaction mark instead, and any echo of them in the answer's text is scrubbed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pressloop.contracts import (
    ActionCall,
    CatalogEntry,
    DecisionProtocol,
    EventType,
    Message,
    Role,
    TurnStatus,
)
from pressloop.engine.decision_parser import decision_schema, parse_json_decision
from pressloop.engine.prompt import render_for_json_protocol, system_prompt
from pressloop.engine.state import CallModel, Finish, LoopStep, RunActions, TurnState
from pressloop.engine.taint import model_history
from pressloop.errors import InvalidModelOutput, LimitExceeded
from pressloop.providers.base import ModelRequest, ModelResponse, ResponseDone, TextDelta, ToolSpec
from pressloop.redaction import SECRET, redact, scrub, secret_values

CORRECTION = (
    "Your last answer could not be used: {problem}. Answer again, following the expected format "
    "exactly."
)


@dataclass(kw_only=True)
class Plan:
    thought: str
    reply: str
    calls: list[ActionCall]
    raw_text: str


def _build_request(state: TurnState, extra: list[Message]) -> ModelRequest:
    deps = state.deps
    protocol = deps.decision_protocol()
    catalog = deps.actions.catalog()
    transcript = model_history(deps, state.checkpoint)
    if protocol is DecisionProtocol.JSON:
        messages = render_for_json_protocol(transcript + extra)
        tools: list[ToolSpec] = []
        schema = decision_schema([(e.name, e.params_schema) for e in catalog])
    else:
        messages = transcript + extra
        tools = [
            ToolSpec(name=e.name, description=e.description, parameters=e.params_schema)
            for e in catalog
        ]
        schema = None
    return ModelRequest(
        system=system_prompt(deps.prompt, catalog, protocol),
        messages=messages,
        tools=tools,
        max_output_tokens=deps.max_output_tokens,
        response_schema=schema,
    )


def _hold_secrets(state: TurnState, plan: Plan, catalog: list[CatalogEntry]) -> Plan:
    """The plan as it may be stored: secret params kept in `state.secrets`, marked in the calls,
    and scrubbed from the answer's text (a JSON-protocol answer spells its params out)."""
    names = {e.name: e.secret_params for e in catalog if e.secret_params}
    values: list[str] = []
    calls: list[ActionCall] = []
    for call in plan.calls:
        fields = names.get(call.name, [])
        if fields and "_raw_arguments" in call.params:  # unreadable JSON: it may hold one
            call = call.model_copy(update={"params": {"_raw_arguments": SECRET}})
        held = {n: call.params[n] for n in fields if secret_values(call.params, [n])}
        if held:
            state.secrets[call.id] = held
            values += [str(v) for v in held.values()]
            call = call.model_copy(update={"params": redact(call.params, fields)})
        calls.append(call)
    if calls == plan.calls:
        return plan
    return Plan(
        thought=scrub(plan.thought, values),
        reply=scrub(plan.reply, values),
        calls=calls,
        raw_text=scrub(plan.raw_text, values),
    )


async def _ask(state: TurnState, request: ModelRequest, *, stream_text: bool) -> ModelResponse:
    final: ModelResponse | None = None
    async for part in state.deps.provider.stream(request):
        if isinstance(part, TextDelta):
            if stream_text and part.text:
                await state.deps.emit(EventType.MESSAGE, {"delta": part.text})
        elif isinstance(part, ResponseDone):
            final = part.response
    if final is None:
        raise InvalidModelOutput("the model stream ended without an answer")
    return final


def _plan(response: ModelResponse, protocol: DecisionProtocol, round_no: int) -> Plan:
    if protocol is DecisionProtocol.JSON:
        decision = parse_json_decision(response.text, id_prefix=f"r{round_no}")
        return Plan(
            thought=decision.thought,
            reply=decision.reply,
            calls=list(decision.actions),
            raw_text=response.text,
        )
    if not response.text.strip() and not response.tool_calls:
        raise InvalidModelOutput("the answer was empty: no text and no tool calls")
    return Plan(thought="", reply=response.text, calls=response.tool_calls, raw_text=response.text)


async def call_model(state: TurnState, _step: CallModel) -> LoopStep:
    deps, cp, policy = state.deps, state.checkpoint, state.request.policy
    if deps.cancel_requested():
        return Finish(status=TurnStatus.CANCELLED)
    if cp.round >= policy.max_rounds:
        error = LimitExceeded(f"the turn reached its limit of {policy.max_rounds} rounds")
        return Finish(status=TurnStatus.FAILED, error=error.info())
    protocol = deps.decision_protocol()
    extra: list[Message] = []
    plan: Plan | None = None
    for attempt in range(2):
        response = await _ask(
            state, _build_request(state, extra), stream_text=protocol is DecisionProtocol.TOOLS
        )
        cp.usage = cp.usage.plus(response.usage.model_copy(update={"model_calls": 1}))
        await deps.emit(
            EventType.TOKENS,
            {"input": response.usage.input_tokens, "output": response.usage.output_tokens},
        )
        try:
            plan = _plan(response, protocol, cp.round)
            break
        except InvalidModelOutput as problem:
            if attempt == 1:
                unusable = InvalidModelOutput(
                    f"the model's answer was unusable after one corrective retry: {problem.message}"
                )
                return Finish(status=TurnStatus.FAILED, error=unusable.info())
            extra = [
                Message(role=Role.ASSISTANT, content=response.text or "(empty answer)"),
                Message(role=Role.USER, content=CORRECTION.format(problem=problem.message)),
            ]
    assert plan is not None
    plan = _hold_secrets(state, plan, deps.actions.catalog())
    cp.round += 1
    if plan.thought:
        await deps.emit(EventType.THINKING, {"text": plan.thought})
    cp.messages.append(Message(role=Role.ASSISTANT, content=plan.raw_text, tool_calls=plan.calls))
    if plan.reply:
        cp.assistant_text = plan.reply
        await deps.emit(EventType.MESSAGE, {"text": plan.reply, "final": not plan.calls})
    await state.save()
    if cp.usage.total_tokens > policy.max_tokens:
        error = LimitExceeded(
            f"the turn used {cp.usage.total_tokens} tokens, over its limit of {policy.max_tokens}"
        )
        return Finish(status=TurnStatus.FAILED, error=error.info())
    if not plan.calls:
        return Finish(status=TurnStatus.SUCCEEDED)
    return RunActions()
