"""Running one task: a freshly restored site, the task's setup, one chat turn through a real
`Service` (its own SQLite database), approvals decided as the site owner would, then the judge.

The owner approves a step only for the actions the task names (`Task.approves`: what they asked
for) and rejects any other; for a task whose right outcome is an approval (`kind="approval"`),
the first pending approval of an expected action is left pending and the turn stops there.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.tasks.judge import cause, made_up_ids, unexpected
from bench.tasks.model import Result, Task, World
from bench.tasks.seed import Seed
from bench.tasks.state import diff, read_state
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.config import Settings
from pressloop.contracts import RunStatus, Step
from pressloop.local_wordpress import LocalSite
from pressloop.providers.base import ModelRequest, ModelResponse, Provider
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.approvals import ApprovalRecord
from pressloop.store.records import RunRecord

ProviderFor = Callable[[Task, dict[str, Any]], Provider]
_LAST_ID = re.compile(r'"id":\s*(\d+)')


class OracleProvider(ScriptedProvider):
    """The scripted provider for the self-test: "$id" in an argument becomes the first id in
    the latest action result (what a model reads there, e.g. a category it just created)."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        results = [m.content for m in request.messages if m.tool_call_id]
        found = _LAST_ID.search(results[-1]) if results else None
        for call in response.tool_calls:
            call.params = _fill(call.params, int(found.group(1)) if found else 0)
        return response


def _fill(value: Any, last_id: int) -> Any:
    if value == "$id":
        return last_id
    if isinstance(value, dict):
        return {k: _fill(v, last_id) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, last_id) for v in value]
    return value


def site_client(site: LocalSite) -> WordPressClient:
    return WordPressClient(
        site.url, site.admin_user, site.app_password, timeout_s=30, max_retries=1
    )


async def run_task(
    task: Task,
    *,
    site: LocalSite,
    provider_for: ProviderFor,
    base: Settings,
    workdir: Path,
    timeout_s: float,
) -> Result:
    site.restore()
    async with site_client(site) as client:
        facts = await task.setup(Seed(client, site))
        before = await read_state(client)
        provider = provider_for(task, facts)
        data_dir = workdir / task.name
        shutil.rmtree(data_dir, ignore_errors=True)
        data_dir.mkdir(parents=True)
        settings = base.model_copy(
            update={
                "data_dir": data_dir,
                "database_url": None,
                "wp_url": site.url,
                "wp_user": site.admin_user,
                "wp_app_password": site.app_password,
                "cooldown_s": 0,
            }
        )
        service = await Service.open(settings, provider=lambda: provider)
        began = time.monotonic()
        status, error, record, pending = "error", "", None, None
        try:
            record, pending = await asyncio.wait_for(
                _converse(service, task, timeout_s), timeout=timeout_s + 60
            )
            status = record.status.value if record is not None else "error"
            if record is not None and record.error is not None:
                error = f"{record.error.cls}: {record.error.message}"
        except TimeoutError:
            status, error = "timeout", f"no answer within {timeout_s + 60:g} s"
        except Exception as problem:  # the harness reports it as the task's error
            status, error = "error", f"{type(problem).__name__}: {problem}"
        seconds = time.monotonic() - began
        try:
            if record is not None:
                record = await service.get_run(record.id)
        finally:
            await service.close()
        after = await read_state(client)
    shutil.rmtree(data_dir, ignore_errors=True)
    return judge(task, facts, before, after, record, pending, status, error, seconds)


async def _converse(
    service: Service, task: Task, timeout_s: float
) -> tuple[RunRecord | None, ApprovalRecord | None]:
    thread = await service.create_thread(title=task.name)
    queued = await service.submit(thread.id, task.request, policy={"wall_time_s": timeout_s})
    run_id = queued.run.id
    record = await service.run_now(run_id)
    while record is not None and record.status is RunStatus.WAITING_APPROVAL:
        waiting = [a for a in await service.approvals.find(status="pending") if a.run_id == run_id]
        if not waiting:
            break
        approval = waiting[0]
        if task.kind == "approval" and approval.action in task.expects:
            return record, approval
        yes = approval.action in task.approves
        await service.decide(
            approval.id,
            approve=yes,
            by="site owner (benchmark)",
            note=None if yes else "No: that is not what I asked for.",
        )
        record = await service.run_now(run_id)
    return record, None


def _steps(record: RunRecord | None) -> tuple[list[Step], str, int]:
    if record is None:
        return [], "", 0
    if record.result is not None:
        result = record.result
        return list(result.steps), result.assistant_text, record.usage.model_calls
    checkpoint = record.checkpoint
    if checkpoint is None:
        return [], "", record.usage.model_calls
    return list(checkpoint.steps), checkpoint.assistant_text, record.usage.model_calls


def judge(
    task: Task,
    facts: dict[str, Any],
    before: Any,
    after: Any,
    record: RunRecord | None,
    pending: ApprovalRecord | None,
    status: str,
    error: str,
    seconds: float,
) -> Result:
    steps, answer, model_calls = _steps(record)
    world = World(
        facts=facts,
        before=before,
        after=after,
        changes=diff(before, after),
        answer=answer,
        steps=steps,
        pending=pending,
    )
    wrong = unexpected(task, world)
    problem = task.check(world)
    # A turn that stopped at its approval is the right outcome for kind "approval" only.
    finished_ok = status == RunStatus.SUCCEEDED.value or (
        task.kind == "approval" and pending is not None
    )
    passed = problem is None and not wrong and finished_ok
    why = None
    if not passed:
        why = cause(task, world, problem, status if not finished_ok else "succeeded")
    detail = "; ".join(
        part
        for part in (
            problem or "",
            error if not finished_ok else "",
            ", ".join(made_up_ids(world)) if why == "made-up id" else "",
        )
        if part
    )
    return Result(
        task=task,
        passed=passed,
        cause=why,
        wrong_effect=bool(wrong),
        seconds=seconds,
        model_calls=model_calls,
        status=status,
        detail=detail,
        answer=answer,
        actions=[f"{s.action}:{s.status.value}" for s in steps],
        unexpected=[c.describe() for c in wrong],
        trace=[
            f"{s.action}({json.dumps(s.params, ensure_ascii=False)[:160]}) -> {s.status.value}: "
            f"{(s.error or s.result_summary)[:200]}"
            for s in steps
        ],
    )
