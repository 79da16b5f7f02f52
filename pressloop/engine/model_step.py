"""CallModel: build the prompt, ask the model (streaming), normalise its answer to a plan.

An unusable answer gets one corrective retry (the problem, then the same DECISION_FORMAT the
system prompt has); a second unusable answer ends the turn with an error naming the first
problem, except plain prose (no JSON at all), which becomes the reply. The corrective exchange is
not kept in the transcript. When an action failed on the run's last attempt (`TurnState.ending`)
the model is asked once more, only to explain; the turn then ends with that failure. Secret
params of the plan's calls are held in memory (`TurnState.secrets`); the transcript, the
checkpoint and the events get the redaction mark instead, and any echo of them in the answer's
text is scrubbed.
"""

from __future__ import annotations

from dataclasses import dataclass

from pressloop.contracts import (
    ActionCall,
    CatalogEntry,
    DecisionProtocol,
    EventType,
    Message,
    NextAction,
    Role,
    Step,
    TurnStatus,
)
from pressloop.engine.decision_format import correction
from pressloop.engine.decision_parser import decision_schema, parse_json_decision
from pressloop.engine.grounded import unbacked_claim, unnamed_listing
from pressloop.engine.prompt import render_for_json_protocol, system_prompt
from pressloop.engine.state import CallModel, Finish, LoopStep, RunActions, TurnState
from pressloop.engine.taint import model_history
from pressloop.errors import InvalidModelOutput, LeaseLost, LimitExceeded, RunFailure
from pressloop.providers.base import ModelRequest, ModelResponse, ResponseDone, TextDelta, ToolSpec
from pressloop.redaction import SECRET, redact, scrub, secret_values

ENDING = (
    "An action failed on this run's last attempt: {problem}. The turn ends now and no more "
    "actions will run. Tell the person in a short reply what was done, what failed and what "
    "they can do about it."
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
        streams_text=protocol is DecisionProtocol.TOOLS,
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


async def _ask(state: TurnState, request: ModelRequest) -> ModelResponse:
    final: ModelResponse | None = None
    async for part in state.deps.provider.stream(request):
        if isinstance(part, TextDelta):
            if request.streams_text and part.text:
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
    if state.ending is not None:
        return await _explain(state)
    if cp.round >= policy.max_rounds:
        error = LimitExceeded(f"the turn reached its limit of {policy.max_rounds} rounds")
        return Finish(status=TurnStatus.FAILED, error=error.info())
    decided = await _decide(state, [])
    if isinstance(decided, Finish):
        return decided
    plan = await _keep(state, _checked(decided, cp.steps, state))
    if cp.usage.total_tokens > policy.max_tokens:
        error = LimitExceeded(
            f"the turn used {cp.usage.total_tokens} tokens, over its limit of {policy.max_tokens}"
        )
        return Finish(status=TurnStatus.FAILED, error=error.info())
    if not plan.calls:
        return Finish(status=TurnStatus.SUCCEEDED)
    return RunActions()


def _checked(plan: Plan, steps: list[Step], state: TurnState) -> Plan:
    """A final reply that claims a change the turn's steps do not show gets Pressloop's note of
    what failed; with answers from results, one that names none of what the turn's reads listed
    gets the list (`grounded.py`). The transcript keeps the model's own words."""
    if plan.calls:
        return plan
    note = unbacked_claim(plan.reply, steps)
    if note is None and state.deps.answer_from_results:
        note = unnamed_listing(plan.reply, steps, state.checkpoint.messages)
    if note is None:
        return plan
    return Plan(
        thought=plan.thought,
        reply=f"{plan.reply}\n\n{note}" if plan.reply else note,
        calls=plan.calls,
        raw_text=plan.raw_text,
    )


async def _answer(state: TurnState, extra: list[Message]) -> ModelResponse:
    """One model call (its text streamed with native tools) and its usage counted."""
    deps = state.deps
    response = await _ask(state, _build_request(state, extra))
    state.checkpoint.usage = state.checkpoint.usage.plus(
        response.usage.model_copy(update={"model_calls": 1})
    )
    await deps.emit(
        EventType.TOKENS,
        {"input": response.usage.input_tokens, "output": response.usage.output_tokens},
    )
    return response


async def _decide(state: TurnState, extra: list[Message]) -> Plan | Finish:
    """The model's plan, with one corrective retry after an unusable answer."""
    protocol, round_no = state.deps.decision_protocol(), state.checkpoint.round
    response = await _answer(state, extra)
    try:
        return _plan(response, protocol, round_no)
    except InvalidModelOutput as problem:
        first = problem
    retry = [
        Message(role=Role.ASSISTANT, content=response.text or "(empty answer)"),
        Message(role=Role.USER, content=correction(first.message, protocol)),
    ]
    response = await _answer(state, [*extra, *retry])
    try:
        return _plan(response, protocol, round_no)
    except InvalidModelOutput as problem:
        return _unusable(first, problem, response, protocol)


def _unusable(
    first: InvalidModelOutput,
    second: InvalidModelOutput,
    response: ModelResponse,
    protocol: DecisionProtocol,
) -> Plan | Finish:
    """After the corrective retry: plain prose is the reply (a model that will not speak JSON
    still answered); anything else fails the turn, naming the first problem the model met."""
    text = response.text.strip()
    if protocol is DecisionProtocol.JSON and text and "{" not in text:
        return Plan(thought="", reply=text, calls=[], raw_text=text)
    message = f"the model's answer was unusable after one corrective retry: {first.message}"
    if second.message != first.message:
        message += f" (the corrected answer: {second.message})"
    return Finish(status=TurnStatus.FAILED, error=InvalidModelOutput(message).info())


async def _keep(state: TurnState, plan: Plan) -> Plan:
    """Record the model's answer in the transcript (secrets held back) and say it."""
    deps, cp = state.deps, state.checkpoint
    plan = _hold_secrets(state, plan, deps.actions.catalog())
    cp.round += 1
    if plan.thought:
        await deps.emit(EventType.THINKING, {"text": plan.thought})
    cp.messages.append(Message(role=Role.ASSISTANT, content=plan.raw_text, tool_calls=plan.calls))
    if plan.reply:
        cp.assistant_text = plan.reply
        await deps.emit(EventType.MESSAGE, {"text": plan.reply, "final": not plan.calls})
    await state.save()
    return plan


async def _explain(state: TurnState) -> Finish:
    """The run's last attempt met a failure it cannot retry: the model, told the failed step's
    result, is asked once more to explain (its actions, if any, are not run), then the turn
    ends with that failure. If the model fails too, the failure alone ends it."""
    ending = state.ending
    assert ending is not None
    done = Finish(
        status=TurnStatus.FAILED,
        error=ending,
        next_action=NextAction.RESCHEDULE if ending.retryable else NextAction.STOP,
    )
    told = Message(role=Role.USER, content=ENDING.format(problem=ending.message.rstrip(".")))
    try:
        decided = await _decide(state, [told])
    except LeaseLost:
        raise
    except RunFailure:
        return done
    if isinstance(decided, Plan) and decided.reply:
        words = Plan(thought=decided.thought, reply=decided.reply, calls=[], raw_text=decided.reply)
        await _keep(state, words)
    return done
