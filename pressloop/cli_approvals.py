"""`pressloop approvals ...`: the steps waiting for a person, and the decisions."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from pressloop.actions.guard import taint_note
from pressloop.cli_common import console, local_user, opened, run_command
from pressloop.cli_render import compact, when
from pressloop.contracts import UntrustedSource
from pressloop.store.approvals import ApprovalRecord

approvals_app = typer.Typer(
    no_args_is_help=True, help="Approvals of destructive and sensitive steps."
)


def approvals_table(approvals: list[ApprovalRecord]) -> Table:
    """One row an approval: the params the step runs with (marked when a person edited them;
    `show` has the agent's), who asked (the person and the trigger) and what became of it."""
    table = Table(
        "id", "status", "action", "runs with", "asked by", "step", "run", "expires / decided"
    )
    for a in approvals:
        params = escape(compact(a.run_params, 60))
        table.add_row(
            a.id,
            a.status + (f" by {escape(a.decided_by)}" if a.decided_by else ""),
            a.action,
            f"[bold]edited:[/] {params}" if _edited(a) else params,
            escape(a.asked_by),
            a.step or "",
            a.run_id,
            when(a.expires_at if a.status == "pending" else a.decided_at),
        )
    return table


def _edited(approval: ApprovalRecord) -> bool:
    return approval.edited_params is not None and approval.edited_params != approval.params


def print_params(approval: ApprovalRecord) -> None:
    """The params that run, and the agent's when a person edited them."""
    if _edited(approval):
        console.print(f"[bold]runs with (edited by {escape(approval.decided_by or '?')})[/]")
        console.print_json(json.dumps(approval.run_params, default=str))
        console.print("[bold]the agent asked for[/]")
    else:
        console.print("[bold]params[/]")
    console.print_json(json.dumps(approval.params, default=str))


@approvals_app.command("list")
def approvals_list(
    status: Annotated[
        str | None, typer.Option(help="pending, approved, rejected, expired, cancelled")
    ] = None,
) -> None:
    """Pending approvals first, then the history."""

    async def show() -> int:
        async with opened() as service:
            console.print(approvals_table(await service.approvals.find(status=status)))
        return 0

    run_command(show())


@approvals_app.command("show")
def approvals_show(approval_id: str) -> None:
    """One approval: the step, why the agent wants it, and the preview of the change."""

    async def show() -> int:
        async with opened() as service:
            approval = await service.approvals.get(approval_id)
        console.print(approvals_table([approval]))
        console.print(f"[bold]asked by[/] {escape(approval.asked_by)}", soft_wrap=True)
        if approval.step_outcome is not None:
            console.print(
                f"[bold]step[/] {approval.step}: {escape(approval.step_outcome.summary)}",
                soft_wrap=True,
            )
        console.print(f"[bold]reason[/] {escape(approval.reason)}", soft_wrap=True)
        if approval.untrusted:
            sources = [UntrustedSource.model_validate(s) for s in approval.untrusted]
            console.print(
                f"[bold]untrusted content in front of the agent[/] {escape(taint_note(sources))}",
                soft_wrap=True,
            )
        print_params(approval)
        console.print("[bold]preview[/]")
        console.print_json(json.dumps(approval.preview, default=str))
        return 0

    run_command(show())


def _decide(approval_id: str, approve: bool, note: str | None, params: str | None) -> None:
    edited: dict[str, Any] | None = None
    if params is not None:
        try:
            edited = json.loads(params)
        except ValueError as exc:
            raise typer.BadParameter(f"--params is not JSON: {exc}") from None
        if not isinstance(edited, dict):
            raise typer.BadParameter("--params must be a JSON object")

    async def decide() -> int:
        async with opened() as service:
            decided = await service.decide(
                approval_id, approve=approve, by=local_user(), note=note, params=edited
            )
            # Resume the run here: a worker would too, this way the answer comes now.
            run = await service.run_now(decided.run_id)
        console.print(approvals_table([decided]))
        if run is not None:
            console.print(f"run {run.id}: {run.status.value}", soft_wrap=True)
        return 0

    run_command(decide())


@approvals_app.command("approve")
def approvals_approve(
    approval_id: str,
    note: Annotated[str | None, typer.Option(help="Why (kept with the decision).")] = None,
    params: Annotated[str | None, typer.Option(help="Edited params, as a JSON object.")] = None,
) -> None:
    """Run the step (optionally with edited params); the agent goes on."""
    _decide(approval_id, True, note, params)


@approvals_app.command("reject")
def approvals_reject(
    approval_id: str,
    note: Annotated[str | None, typer.Option(help="Told to the agent.")] = None,
) -> None:
    """Skip the step; the agent is told and goes on."""
    _decide(approval_id, False, note, None)
