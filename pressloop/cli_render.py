"""How the `pressloop` command shows things to a person: a live run, and tables of records."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pressloop.contracts import Event, EventType, RunStatus
from pressloop.runtime.bus import rest_after_parts
from pressloop.store.records import RunRecord, ThreadRecord

STATUS_STYLE = {
    RunStatus.SUCCEEDED: "green",
    RunStatus.RUNNING: "cyan",
    RunStatus.QUEUED: "cyan",
    RunStatus.WAITING_APPROVAL: "yellow",
    RunStatus.FAILED: "red",
    RunStatus.TIMED_OUT: "red",
    RunStatus.CANCELLED: "yellow",
    RunStatus.DEAD: "red",
}


def compact(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def status_text(status: RunStatus) -> Text:
    return Text(status.value, style=STATUS_STYLE.get(status, ""))


class EventPrinter:
    """Prints a run's events as they come: thinking dim, the answer streamed, actions and results
    one line each, errors in red; token counts are added up for the summary."""

    def __init__(self, console: Console) -> None:
        self.console = console
        # The newest event shown whole, and how many text delta parts after it were shown
        # (deltas streamed before their commit: `data.after`, `data.part`).
        self.last_seq = 0
        self.parts_shown = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self._streaming = False
        self._last_error: str | None = None

    def _line(self, text: Text | str) -> None:
        self._end_stream()
        self.console.print(text, soft_wrap=True, highlight=False)

    def _end_stream(self) -> None:
        if self._streaming:
            self.console.print()
            self._streaming = False

    def show(self, event: Event) -> None:
        if event.data.keys() == {"delta", "after", "part"}:  # a delta before its commit
            self.last_seq, self.parts_shown = int(event.data["after"]), int(event.data["part"])
        elif self.parts_shown and event.seq == self.last_seq + 1:
            # Stored events read after the live stream: the text of the parts shown is skipped
            # (the stream itself sends no event that parts shown already cover).
            rest, self.parts_shown = rest_after_parts(event, self.parts_shown)
            self.last_seq = event.seq
            if rest is None:
                return
            event = rest
        else:
            self.last_seq, self.parts_shown = max(self.last_seq, event.seq), 0
        data = event.data
        match event.type:
            case EventType.RUN_STARTED:
                self._line(Text(f"run {event.run_id} (attempt {data.get('attempt')})", "dim"))
            case EventType.THINKING:
                self._line(Text(str(data.get("text", "")), "dim italic"))
            case EventType.MESSAGE:
                self._message(data)
            case EventType.ACTION:
                params = compact(data.get("params", {}))
                self._line(
                    Text.assemble(("→ ", "cyan"), (str(data.get("action")), "bold"), " ", params)
                )
            case EventType.RESULT:
                self._result(data)
            case EventType.APPROVAL:
                self._line(
                    Text(
                        f"⏸ {data.get('action')} ({data.get('risk')}) waits for approval "
                        f"{data.get('approval_id')}",
                        "yellow",
                    )
                )
            case EventType.TOKENS:
                self.input_tokens += int(data.get("input", 0))
                self.output_tokens += int(data.get("output", 0))
            case EventType.ERROR:
                self._error(data)
            case EventType.RUN_FINISHED:
                self._end_stream()
                if data.get("notice"):
                    self.notice(str(data["notice"]))
            case EventType.STEP:
                self._end_stream()

    def notice(self, text: str) -> None:
        """Pressloop's own words (a run that failed, died, was cancelled or waits)."""
        self._line(Text.assemble(("Pressloop: ", "bold yellow"), text))

    def _error(self, data: dict[str, Any]) -> None:
        """An error once: a retry's event repeats the turn's error it follows."""
        message = str(data.get("message", data))
        if message == self._last_error:
            return
        self._last_error = message
        retry = f" (retry at {data['retry_at']})" if data.get("retry_at") else ""
        self._line(Text(f"error: {message}{retry}", "bold red"))

    def _message(self, data: dict[str, Any]) -> None:
        if "delta" in data:
            self.console.print(
                str(data["delta"]), end="", soft_wrap=True, highlight=False, markup=False
            )
            self._streaming = True
        elif data.get("by") == "pressloop":
            self.notice(str(data.get("text", "")))
        elif self._streaming:
            self._end_stream()  # the streamed deltas were this text
        elif data.get("text"):
            self._line(Text(str(data["text"])))

    def _result(self, data: dict[str, Any]) -> None:
        status, message = str(data.get("status")), str(data.get("message", ""))
        if status == "succeeded":
            self._line(Text.assemble(("✓ ", "green"), message))
        elif status == "pending_approval":
            self._line(Text(f"⏸ {message}", "yellow"))
        else:
            self._line(Text.assemble(("✗ ", "red"), f"{status}: {message}"))

    def summary(self, run: RunRecord) -> None:
        self._end_stream()
        line = Text.assemble(
            status_text(run.status),
            f" · {self.input_tokens} input + {self.output_tokens} output tokens",
            f" · {plural(run.usage.model_calls, 'model call')}",
            f", {plural(run.usage.action_calls, 'action')}",
        )
        self.console.print(line, soft_wrap=True, highlight=False)


def runs_table(runs: list[RunRecord]) -> Table:
    table = Table("run", "thread", "status", "trigger", "attempt", "created", "tokens", "input")
    for run in runs:
        table.add_row(
            run.id,
            run.thread_id,
            status_text(run.status),
            run.trigger.value,
            f"{run.attempt}/{run.max_attempts}",
            when(run.created_at),
            str(run.usage.total_tokens),
            Text((run.input or "")[:40]),
        )
    return _no_wrap(table, 2)


def threads_table(threads: list[ThreadRecord]) -> Table:
    table = Table("thread", "title", "agent", "parent", "by", "updated")
    for thread in threads:
        table.add_row(
            thread.id,
            Text(thread.title),
            thread.agent_id,
            thread.parent_id or "-",
            thread.created_by or "-",
            when(thread.updated_at),
        )
    return _no_wrap(table, 1)


def events_table(events: list[Event]) -> Table:
    table = Table("seq", "time", "type", "data")
    for event in events:
        table.add_row(
            str(event.seq), when(event.ts), event.type.value, Text(compact(event.data, 120))
        )
    return _no_wrap(table, 3)


def _no_wrap(table: Table, id_columns: int) -> Table:
    """Ids are copied and pasted: never wrap or shorten them."""
    for column in table.columns[:id_columns]:
        column.no_wrap = True
        column.overflow = "fold"
    return table


def run_detail(console: Console, run: RunRecord) -> None:
    console.print(Text.assemble(("run ", "bold"), run.id, "  ", status_text(run.status)))
    fields = {
        "thread": run.thread_id,
        "trigger": run.trigger.value,
        "user": run.requesting_user or "-",
        "attempt": f"{run.attempt}/{run.max_attempts}",
        "created": when(run.created_at),
        "finished": when(run.finished_at),
        "tokens": f"{run.usage.input_tokens} in / {run.usage.output_tokens} out",
    }
    for name, value in fields.items():
        console.print(f"  {name:<9} {escape(value)}", highlight=False, soft_wrap=True)
    if run.input:
        console.print(Text.assemble(("> ", "bold"), run.input), soft_wrap=True)
    if run.result is not None:
        for step in run.result.steps:
            mark = ("✓ ", "green") if step.status.value == "succeeded" else ("✗ ", "red")
            console.print(
                Text.assemble(
                    f"  {step.index}. ",
                    mark,
                    step.action,
                    " ",
                    compact(step.params),
                    f" → {step.result_summary or step.error or step.status.value}",
                ),
                soft_wrap=True,
            )
        if run.result.assistant_text:
            console.print(Text(run.result.assistant_text), soft_wrap=True)
    if run.error is not None:
        console.print(Text(f"error: {run.error.cls}: {run.error.message}", "red"), soft_wrap=True)
