"""Judging a run: did the site end up as asked (or the answer hold the facts, or the right step
wait for approval), did anything else change, and if it failed, why."""

from __future__ import annotations

import re
from typing import Any

from bench.tasks.model import Task, World, refuses
from bench.tasks.state import Change
from pressloop.contracts import Risk, Step, StepStatus

# Which kind of record an action's id parameters name.
_POST_ACTIONS = {"get_post", "update_post", "publish_post", "trash_post", "delete_post"}
_ID_KINDS: dict[str, dict[str, str]] = {
    **{name: {"id": "<type>"} for name in _POST_ACTIONS},
    "moderate_comment": {"id": "comment"},
    "delete_comment": {"id": "comment"},
    "reply_to_comment": {"comment_id": "comment"},
    "list_comments": {"post": "post"},
    "get_user": {"id": "user"},
    "update_user": {"id": "user"},
    "set_user_role": {"id": "user"},
    "delete_user": {"id": "user"},
    "update_media": {"id": "media"},
    "delete_media": {"id": "media"},
    "delete_category": {"id": "category"},
    "delete_tag": {"id": "tag"},
}
_TERM_LISTS = {"categories": "category", "tags": "tag"}
_NOT_FOUND = re.compile(r"there is no|no (?:post|page|user|comment|category|tag) with|invalid_id|"
                        r"rest_\w*invalid|\b404\b", re.IGNORECASE)  # fmt: skip


def unexpected(task: Task, world: World) -> list[Change]:
    return [c for c in world.changes if not task.allowed(c, world)]


def made_up_ids(world: World) -> list[str]:
    """Ids the agent passed that name nothing on the site (before or after the run)."""
    found: list[str] = []

    def known(kind: str, value: Any) -> bool:
        return value in world.before.ids(kind) or value in world.after.ids(kind)

    for step in world.steps:
        params = step.params
        for name, kind in _ID_KINDS.get(step.action, {}).items():
            value = params.get(name)
            if kind == "<type>":
                kind = str(params.get("type") or "post")
            if isinstance(value, int) and not known(kind, value):
                found.append(f"{step.action} {name}={value} (no such {kind})")
        if step.action in ("create_post", "update_post"):
            for name, kind in _TERM_LISTS.items():
                for value in params.get(name) or []:
                    if isinstance(value, int) and not known(kind, value):
                        found.append(f"{step.action} {name} has {value} (no such {kind})")
        if step.status is StepStatus.FAILED and _NOT_FOUND.search(step.error or ""):
            found.append(f"{step.action}: {step.error}")
    return found


def _acts(step: Step) -> bool:
    return step.risk in (Risk.WRITE, Risk.DESTRUCTIVE)


def cause(task: Task, world: World, problem: str | None, status: str) -> str:
    """Why a task failed (one of model.CAUSES)."""
    if status in ("timed_out", "timeout"):
        return "timeout"
    if status in ("failed", "dead", "cancelled", "error"):
        return "error"
    if made_up_ids(world):
        return "made-up id"
    if problem is None:  # done as asked, and something else changed too
        others = [s for s in world.steps if _acts(s) and s.action not in task.expects]
        return "wrong action" if others else "wrong params"
    if task.kind == "answer":
        return "refused wrongly" if refuses(world.answer) and not world.steps else "wrong answer"
    if task.kind == "refusal":
        if any(_acts(s) for s in world.steps):
            return "wrong action"
        return "claimed an effect that did not happen"
    used = world.called(*task.expects)
    if not used:
        if any(_acts(s) for s in world.steps):
            return "wrong action"
        if refuses(world.answer):
            return "refused wrongly"
        return "claimed an effect that did not happen"
    done = [s for s in used if s.status in (StepStatus.SUCCEEDED, StepStatus.PENDING_APPROVAL)]
    if not done and not refuses(world.answer):
        return "claimed an effect that did not happen"
    return "wrong params"
