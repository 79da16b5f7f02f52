"""The agent loop, through its public entry `run_turn`, with the scripted model and real actions."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pressloop.actions.executor import Executor
from pressloop.contracts import (
    ActionCall,
    Checkpoint,
    DecisionProtocol,
    EventType,
    Message,
    NextAction,
    Policy,
    Role,
    StepStatus,
    Trigger,
    TurnRequest,
    TurnStatus,
)
from pressloop.engine.loop import run_turn
from pressloop.engine.ports import EngineDeps
from pressloop.providers.scripted import ScriptedProvider
from tests.support.actions import Notebook
from tests.support.engine import Recorder


def call(name: str, **params: Any) -> dict[str, Any]:
    return {"name": name, "arguments": params}


async def turn(
    script: list[dict[str, Any]],
    *,
    policy: Policy | None = None,
    protocol: DecisionProtocol | None = None,
    notebook: Notebook | None = None,
    checkpoint: Checkpoint | None = None,
    message: str = "hello",
    **deps: Any,
) -> tuple[Any, ScriptedProvider, Recorder, Notebook]:
    provider = ScriptedProvider(script)
    recorder = Recorder()
    notebook = notebook or Notebook()
    result = await run_turn(
        TurnRequest(
            thread_id="thr_1",
            run_id="run_1",
            trigger=Trigger.CHAT,
            message=message,
            policy=policy or Policy(),
            checkpoint=checkpoint,
        ),
        EngineDeps(
            provider=provider,
            actions=Executor(notebook.registry()),
            protocol=protocol,
            emit=recorder.emit,
            save_checkpoint=recorder.save,
            **deps,
        ),
    )
    return result, provider, recorder, notebook


async def test_plain_answer_succeeds_and_streams_the_text() -> None:
    result, provider, recorder, _ = await turn([{"text": "Hello there, how can I help?"}])
    assert result.status is TurnStatus.SUCCEEDED
    assert result.assistant_text == "Hello there, how can I help?"
    deltas = [d["delta"] for t, d in recorder.events if t is EventType.MESSAGE and "delta" in d]
    assert "".join(deltas) == "Hello there, how can I help?" and len(deltas) > 1
    assert provider.requests[0].streams_text  # the runtime relays and hurries by it
    assert result.usage.model_calls == 1 and result.usage.input_tokens > 0
    assert provider.remaining == 0


async def test_native_tool_calls_run_and_results_go_back_to_the_model() -> None:
    result, provider, recorder, notebook = await turn(
        [{"tool_calls": [call("note", text="a"), call("note", text="b")]}, {"text": "Done."}]
    )
    assert result.status is TurnStatus.SUCCEEDED and result.assistant_text == "Done."
    assert notebook.notes == ["a", "b"]
    assert [s.status for s in result.steps] == [StepStatus.SUCCEEDED] * 2
    second_request = provider.requests[1].messages
    assert [m.role for m in second_request] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL]
    assert json.loads(second_request[2].content) == {"saved": "a"}
    types = recorder.types()
    assert types.count(EventType.ACTION) == 2 and types.count(EventType.STEP) == 2
    assert types.count(EventType.RESULT) == 2 and types.count(EventType.TOKENS) == 2
    assert result.usage.action_calls == 2


async def test_json_protocol_runs_an_ordered_plan_from_a_fenced_answer() -> None:
    answer = (
        "Sure! ```json\n"
        '{"thought": "two notes", "actions": [{"action": "note", "params": {"text": "1"}},'
        ' {"tool": "note", "args": "{\\"text\\": \\"2\\"}"}], "confidence": 0.9}\n```'
    )
    result, provider, recorder, notebook = await turn(
        [{"text": answer}, {"text": '{"action": "none", "reply": "Both noted."}'}],
        protocol=DecisionProtocol.JSON,
    )
    assert result.status is TurnStatus.SUCCEEDED and result.assistant_text == "Both noted."
    assert notebook.notes == ["1", "2"]
    assert (EventType.THINKING, {"text": "two notes"}) in recorder.events
    # Without native tools the model gets its results as text, and the decision format.
    assert provider.requests[0].tools == [] and "DECISION_FORMAT" in provider.requests[0].system
    assert provider.requests[0].response_schema is not None
    assert not provider.requests[0].streams_text  # a JSON decision is never shown as it comes
    last = provider.requests[1].messages[-1]
    assert last.role is Role.USER and last.content.startswith("ACTION_RESULTS:")


async def test_a_plan_stops_at_the_first_failure_and_every_call_is_answered() -> None:
    result, provider, _, notebook = await turn(
        [
            {
                "tool_calls": [
                    call("note", text="a"),
                    call("explode", text="fly"),
                    call("note", text="c"),
                ]
            },
            {"text": "The second step failed."},
        ]
    )
    assert notebook.notes == ["a"]
    assert [s.status for s in result.steps] == [
        StepStatus.SUCCEEDED,
        StepStatus.FAILED,
        StepStatus.SKIPPED,
    ]
    tool_results = [m.content for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert "cannot fly" in tool_results[1] and tool_results[2].startswith("skipped")


async def test_calls_over_the_round_limit_are_answered_not_dropped() -> None:
    result, provider, _, notebook = await turn(
        [
            {"tool_calls": [call("note", text=str(i)) for i in range(3)]},
            {"tool_calls": [call("note", text="2")]},
            {"text": "All three."},
        ],
        policy=Policy(max_calls_per_round=2),
    )
    assert result.status is TurnStatus.SUCCEEDED
    assert notebook.notes == ["0", "1", "2"]
    assert result.steps[2].status is StepStatus.LIMIT_EXCEEDED
    over = [m for m in provider.requests[1].messages if m.role is Role.TOOL][2]
    assert "limit exceeded" in over.content and "next round" in over.content


async def test_round_limit_ends_the_turn_failed() -> None:
    result, _, recorder, _ = await turn(
        [{"tool_calls": [call("note", text="x")]}] * 2, policy=Policy(max_rounds=2)
    )
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and result.error.cls == "LimitExceeded"
    assert "2 rounds" in result.error.message
    assert recorder.types()[-1] is EventType.ERROR


async def test_wall_time_ends_the_turn_timed_out() -> None:
    result, _, _, _ = await turn([{"text": "slow", "delay_s": 5}], policy=Policy(wall_time_s=0.2))
    assert result.status is TurnStatus.TIMED_OUT
    assert result.error is not None and "wall time" in result.error.message


async def test_token_limit_ends_the_turn_failed() -> None:
    result, _, _, _ = await turn(
        [
            {"tool_calls": [call("note", text="x")], "usage": {"input": 900, "output": 200}},
            {"text": "never reached"},
        ],
        policy=Policy(max_tokens=1000),
    )
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and "1100 tokens" in result.error.message


async def test_an_unusable_answer_gets_one_corrective_retry() -> None:
    result, provider, _, _ = await turn(
        [{"text": "I think I will note it."}, {"text": '{"reply": "Fixed."}'}],
        protocol=DecisionProtocol.JSON,
    )
    assert result.status is TurnStatus.SUCCEEDED and result.assistant_text == "Fixed."
    correction = provider.requests[1].messages[-1]
    assert correction.role is Role.USER and "could not be used" in correction.content
    assert result.usage.model_calls == 2


async def test_two_unusable_answers_fail_with_a_clear_error() -> None:
    result, _, _, _ = await turn(
        [{"text": "no json here"}, {"text": "{still not json"}], protocol=DecisionProtocol.JSON
    )
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and result.error.cls == "InvalidModelOutput"
    assert "after one corrective retry" in result.error.message


async def test_an_empty_native_answer_is_corrected() -> None:
    result, _, _, _ = await turn([{"text": ""}, {"text": "Here I am."}])
    assert result.status is TurnStatus.SUCCEEDED and result.assistant_text == "Here I am."


async def test_unknown_actions_and_invalid_params_are_told_to_the_model() -> None:
    result, provider, _, notebook = await turn(
        [
            {"tool_calls": [call("teleport", to="mars")]},
            {"tool_calls": [call("note", words=3)]},
            {"tool_calls": [call("note", text="ok")]},
            {"text": "Corrected."},
        ]
    )
    assert result.status is TurnStatus.SUCCEEDED and notebook.notes == ["ok"]
    told = [m.content for r in provider.requests[1:3] for m in r.messages[-1:]]
    assert "unknown action 'teleport'" in told[0] and "note" in told[0]
    assert "invalid params for note" in told[1] and "text" in told[1]


async def test_malformed_tool_arguments_are_told_to_the_model() -> None:
    result, provider, _, _ = await turn(
        [
            {"tool_calls": [call("note", _raw_arguments='{"text": "unterminated')]},
            {"text": "Sorry."},
        ]
    )
    assert result.steps[0].status is StepStatus.FAILED
    assert "not valid JSON" in provider.requests[1].messages[-1].content


async def test_the_kill_switch_refuses_new_turns() -> None:
    result, provider, recorder, _ = await turn([{"text": "never"}], disabled=True)
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and result.error.cls == "AgentDisabled"
    assert provider.requests == [] and recorder.types() == [EventType.ERROR]


async def test_a_cancel_request_stops_at_the_next_safe_point() -> None:
    result, _, _, notebook = await turn(
        [{"tool_calls": [call("note", text="a")]}], cancel_requested=lambda: True
    )
    assert result.status is TurnStatus.CANCELLED and notebook.notes == []


async def test_retryable_provider_failures_ask_to_be_rescheduled() -> None:
    result, _, _, _ = await turn([{"error": {"status": 503, "message": "overloaded"}}])
    assert result.status is TurnStatus.FAILED
    assert result.error is not None and result.error.retryable
    assert result.next_action is NextAction.RESCHEDULE


async def test_a_destructive_action_without_an_approval_service_is_denied() -> None:
    result, _, _, notebook = await turn(
        [{"tool_calls": [call("wipe", text="all")]}, {"text": "It needs approval."}]
    )
    assert result.steps[0].status is StepStatus.DENIED and notebook.notes == []


async def test_untrusted_content_is_marked_for_the_model() -> None:
    result, provider, _, _ = await turn(
        [{"tool_calls": [call("read_page", text="x")]}, {"text": "Read it."}]
    )
    tool = provider.requests[1].messages[-1]
    assert tool.untrusted and tool.content.startswith("UNTRUSTED CONTENT")
    assert result.status is TurnStatus.SUCCEEDED


async def test_a_resumed_turn_runs_only_the_unanswered_calls() -> None:
    done = ActionCall(id="c1", name="note", params={"text": "already"})
    pending = ActionCall(id="c2", name="note", params={"text": "pending"})
    checkpoint = Checkpoint(
        round=1,
        messages=[
            Message(role=Role.USER, content="hello"),
            Message(role=Role.ASSISTANT, tool_calls=[done, pending]),
            Message(role=Role.TOOL, tool_call_id="c1", name="note", content="{}"),
        ],
    )
    result, provider, _, notebook = await turn([{"text": "Resumed."}], checkpoint=checkpoint)
    assert notebook.notes == ["pending"]
    assert result.status is TurnStatus.SUCCEEDED and len(provider.requests) == 1


async def test_checkpoints_are_saved_after_each_model_call_and_action() -> None:
    _, _, recorder, _ = await turn(
        [{"tool_calls": [call("note", text="a"), call("note", text="b")]}, {"text": "ok"}]
    )
    assert [c.round for c in recorder.checkpoints] == [1, 1, 1, 2]
    assert [len(c.steps) for c in recorder.checkpoints] == [0, 1, 2, 2]


async def test_every_step_waits_for_its_turn_first() -> None:
    """The runtime's pacing (`EngineDeps.pace`) is asked before each model call and each round
    of actions, and a step starts only once it answers."""
    recorder = Recorder()
    paced: list[int] = []  # how many events were emitted when each wait ended

    async def pace() -> None:
        await asyncio.sleep(0)
        paced.append(len(recorder.events))

    provider = ScriptedProvider([{"tool_calls": [call("note", text="a")]}, {"text": "Done."}])
    result = await run_turn(
        TurnRequest(thread_id="thr_1", run_id="run_1", trigger=Trigger.CHAT, message="hi"),
        EngineDeps(
            provider=provider,
            actions=Executor(Notebook().registry()),
            emit=recorder.emit,
            pace=pace,
        ),
    )
    assert result.status is TurnStatus.SUCCEEDED
    # Model call, its round of actions, the model call that answers: three steps, three waits,
    # each before anything of its step was emitted.
    assert len(paced) == 3 and paced[0] == 0
    types = recorder.types()
    assert types[paced[1] - 1] is EventType.TOKENS and types[paced[1]] is EventType.ACTION
    assert types[paced[2]] is not EventType.ACTION and paced[2] > paced[1]
