"""Answers grounded in the run's steps (`engine/grounded.py`), through `run_turn` with the
scripted model and real actions: a round of successful writes ends with Pressloop's account of
them (no second model call) when `answer_from_results` is on; a read, a failure, or the setting
off goes back to the model; and a reply that claims a change nothing made gets Pressloop's note.
"""

from __future__ import annotations

from typing import Any

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import (
    ActionContext,
    EventType,
    Risk,
    Step,
    StepStatus,
    TurnStatus,
)
from pressloop.engine.grounded import left_undone
from tests.engine.test_loop import call, turn
from tests.support.actions import Notebook, NoteParams, action


def finals(recorder: Any) -> list[dict[str, Any]]:
    return [d for t, d in recorder.events if t is EventType.MESSAGE and d.get("final")]


async def test_a_round_of_successful_writes_is_answered_from_its_results() -> None:
    result, provider, recorder, notebook = await turn(
        [
            {"tool_calls": [call("note", text="milk"), call("note", text="eggs")]},
            {"text": "Both notes are saved."},  # never asked for
        ],
        answer_from_results=True,
    )
    assert result.status is TurnStatus.SUCCEEDED
    assert notebook.notes == ["milk", "eggs"]
    assert result.usage.model_calls == 1 and provider.remaining == 1
    assert result.assistant_text == "Done:\n- Noted milk.\n- Noted eggs."
    assert finals(recorder)[-1] == {"text": result.assistant_text, "final": True, "by": "pressloop"}


async def test_without_the_setting_the_model_writes_the_answer() -> None:
    result, provider, _, _ = await turn(
        [{"tool_calls": [call("note", text="milk")]}, {"text": "Saved your note."}]
    )
    assert result.assistant_text == "Saved your note."
    assert result.usage.model_calls == 2 and provider.remaining == 0


async def test_a_round_that_read_something_goes_back_to_the_model() -> None:
    result, provider, _, _ = await turn(
        [
            {"tool_calls": [call("read_page", text="https://example.com")]},
            {"text": "The page asks for something I will not do."},
        ],
        answer_from_results=True,
    )
    assert result.usage.model_calls == 2 and provider.remaining == 0
    assert result.assistant_text == "The page asks for something I will not do."


async def test_a_failed_write_goes_back_to_the_model_and_a_false_claim_is_flagged() -> None:
    result, provider, recorder, notebook = await turn(
        [{"tool_calls": [call("explode", text="publish")]}, {"text": "Published it for you."}],
        answer_from_results=True,
    )
    assert result.usage.model_calls == 2 and provider.remaining == 0
    assert notebook.notes == [] and result.steps[0].status is StepStatus.FAILED
    assert result.assistant_text.startswith("Published it for you.\n\nPressloop: nothing was")
    assert "explode failed: " in result.assistant_text and "cannot publish" in result.assistant_text
    assert finals(recorder)[-1]["text"] == result.assistant_text


async def test_a_reply_that_admits_the_failure_is_left_as_it_is() -> None:
    result, _, _, _ = await turn(
        [
            {"tool_calls": [call("explode", text="publish")]},
            {"text": "I could not publish it: the action failed."},
        ]
    )
    assert result.assistant_text == "I could not publish it: the action failed."


async def test_a_claim_backed_by_a_write_that_succeeded_is_left_as_it_is() -> None:
    result, _, _, _ = await turn(
        [{"tool_calls": [call("note", text="milk")]}, {"text": "Saved and done."}]
    )
    assert result.assistant_text == "Saved and done."


async def test_after_a_failure_the_model_decides_again_even_when_a_later_round_succeeds() -> None:
    result, provider, _, notebook = await turn(
        [
            {"tool_calls": [call("explode", text="post")]},
            {"tool_calls": [call("note", text="category")]},
            {"tool_calls": [call("note", text="post")]},
            {"text": "Made the category, then the post."},
        ],
        answer_from_results=True,
    )
    assert notebook.notes == ["category", "post"]
    assert result.usage.model_calls == 4 and provider.remaining == 0
    assert result.assistant_text == "Made the category, then the post."


async def test_a_round_that_left_a_named_change_undone_goes_back_to_the_model() -> None:
    result, provider, _, notebook = await turn(
        [
            {"tool_calls": [call("note", text="Ten bread myths")]},
            {"tool_calls": [call("note", text="publish it")]},
            {"text": "never asked for"},
        ],
        message="Note 'Ten bread myths' and publish it.",
        answer_from_results=True,
    )
    assert notebook.notes == ["Ten bread myths", "publish it"]
    assert result.usage.model_calls == 2 and provider.remaining == 1
    # The account covers the turn's writes, not only the last round's.
    assert result.assistant_text == "Done:\n- Noted Ten bread myths.\n- Noted publish it."


def test_left_undone_reads_the_marks_of_succeeded_writes_only() -> None:
    def step(action: str, summary: str, done: bool = True, **params: Any) -> Step:
        return Step(
            index=0,
            action=action,
            params=params,
            risk=Risk.WRITE,
            status=StepStatus.SUCCEEDED if done else StepStatus.FAILED,
            result_summary=summary,
        )

    renamed = step("update_post", "updated title of post #4 'Ten bread myths'", title="Ten")
    ask = "Rename the draft 'Untitled idea' to 'Ten bread myths' and publish it."
    assert left_undone(ask, [renamed]) == ["publish"]
    both = step("update_post", "updated status, title of post #4", title="Ten", status="publish")
    assert left_undone(ask, [both]) == []
    assert left_undone(ask, [renamed, step("publish_post", "published post #4")]) == []
    failed = step("publish_post", "", done=False)
    assert left_undone(ask, [renamed, failed]) == ["publish"]
    # "unpublish" is not a publish, and a request that names no listed change asks for nothing.
    assert left_undone("Publish it", [step("unpublish_post", "took post #4 offline")]) == [
        "publish"
    ]
    assert left_undone("Unpublish the post Menu", [step("unpublish_post", "took it offline")]) == []
    assert left_undone(None, []) == []


async def test_a_round_that_left_a_change_undone_tells_the_model_what_is_left() -> None:
    result, provider, _, _ = await turn(
        [
            {"tool_calls": [call("note", text="New oven arrived")]},
            {"text": "Noted it."},
        ],
        message="Note 'New oven arrived' and publish it.",
        answer_from_results=True,
    )
    assert result.usage.model_calls == 2 and provider.remaining == 0
    seen = provider.requests[-1].messages[-1].content
    assert seen.endswith("NEXT: publish (the request asks for it; no action has done it yet)."), (
        seen
    )


class Listing(Notebook):
    """The notebook and a read that lists what it is given (a listing from the site)."""

    async def list_things(
        self, params: NoteParams, _c: ActionContext, _s: ActionServices
    ) -> ActionResult:
        return ActionResult(content=params.text, summary="listed", untrusted=True)

    def specs(self) -> list[ActionSpec]:
        listing = action("list_things", self.list_things, risk=Risk.READ, description="Lists.")
        return [*super().specs(), listing]


async def test_an_answer_naming_nothing_the_reads_listed_gets_the_list() -> None:
    listing = '{"media": [{"title": "Storefront photo"}, {"title": "Bakery logo"}]}'
    result, _, _, _ = await turn(
        [
            {"tool_calls": [call("list_things", text=listing)]},
            {"text": "Two media items in the library."},
        ],
        notebook=Listing(),
        answer_from_results=True,
    )
    assert result.assistant_text == (
        "Two media items in the library.\n\nFrom the results: Storefront photo, Bakery logo."
    )


async def test_an_answer_that_names_a_listed_item_is_left_as_it_is() -> None:
    listing = '[{"name": "Opening Hours"}, {"name": "Akismet"}]'
    for setting, script_reply in ((True, "Opening Hours is active."), (False, "Two plugins.")):
        result, _, _, _ = await turn(
            [{"tool_calls": [call("list_things", text=listing)]}, {"text": script_reply}],
            notebook=Listing(),
            answer_from_results=setting,
        )
        assert result.assistant_text == script_reply
