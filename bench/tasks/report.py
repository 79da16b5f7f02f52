"""The results as tables: printed, and as the Markdown section for docs/benchmarks.md."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from statistics import mean, median

from bench.common import percentile, table
from bench.tasks.model import CAUSES, Result

START_MARKER = "<!-- everyday_tasks:start -->"
END_MARKER = "<!-- everyday_tasks:end -->"


def _cell(text: str, limit: int = 90) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def score(results: Sequence[Result]) -> float:
    """1 - (failures + wrong effects) / tasks: a task that changed the site wrongly counts twice."""
    failed = sum(not r.passed for r in results)
    wrong = sum(r.wrong_effect for r in results)
    return 1 - (failed + wrong) / len(results) if results else float("nan")


def summary(results: Sequence[Result]) -> str:
    seconds = [r.seconds for r in results]
    calls = [r.model_calls for r in results]
    passed = sum(r.passed for r in results)
    row = [
        str(len(results)),
        str(passed),
        f"**{100 * passed / len(results):.0f}%**",
        str(sum(r.wrong_effect for r in results)),
        f"{100 * score(results):.0f}%",
        f"{median(seconds):.1f}",
        f"{percentile(seconds, 90):.1f}",
        f"{mean(calls):.1f} / {median(calls):g}",
    ]
    header = [
        "tasks",
        "passed",
        "success rate",
        "wrong effects",
        "score (wrong effect counts double)",
        "median s / task",
        "p90 s / task",
        "model calls / task (mean / median)",
    ]
    return table(header, [row])


def causes(results: Sequence[Result]) -> str:
    counted = Counter(r.cause for r in results if not r.passed)
    rows = [
        [
            cause,
            str(counted.get(cause, 0)),
            str(sum(r.wrong_effect for r in results if r.cause == cause)),
            ", ".join(r.task.name for r in results if r.cause == cause) or "-",
        ]
        for cause in CAUSES
    ]
    return table(["cause", "failures", "with a wrong effect", "tasks"], rows)


def areas(results: Sequence[Result]) -> str:
    names = list(dict.fromkeys(r.task.area for r in results))
    rows = []
    for area in names:
        mine = [r for r in results if r.task.area == area]
        rows.append([area, str(len(mine)), str(sum(r.passed for r in mine))])
    return table(["area", "tasks", "passed"], rows)


def per_task(results: Sequence[Result]) -> str:
    rows = [
        [
            r.task.name,
            r.task.kind,
            "pass" if r.passed else "**fail**",
            r.cause or "-",
            "yes" if r.wrong_effect else "-",
            f"{r.seconds:.1f}",
            str(r.model_calls),
            _cell(" ".join(r.actions) or "-", 80),
            _cell("; ".join(filter(None, [r.detail, *r.unexpected])) or "-"),
        ]
        for r in results
    ]
    header = ["task", "expects", "result", "cause", "wrong effect", "s", "model calls",
              "actions (status)", "what the judge saw"]  # fmt: skip
    return table(header, rows)


def section(
    results: Sequence[Result], *, command: str, when: str, provider: str, facts: list[str]
) -> str:
    return "\n".join(
        [
            "## Everyday tasks: what a site owner asks",
            "",
            f"Measured {when} with `{command}`; provider: {provider}.",
            "",
            *[f"- {fact}" for fact in facts],
            "",
            "Each task is a request written as a site owner would write it, run as one chat turn "
            "through a real `Service` (its own SQLite database, the chat trigger's policy) on the "
            "local WordPress (Debian's packages, loopback), restored to a fresh install and set "
            "up for the task first (posts, drafts, comments by named people, users, plugins, "
            "media). Destructive and sensitive steps ask for approval as they would in the UI: "
            "the harness approves the actions the request asked for and rejects any other; for "
            "the two requests whose right outcome *is* an approval (deleting a user, making "
            "someone an administrator) the approval must be left pending for the right action "
            "and user, with nothing changed. The judge reads the site back over REST (every "
            "post, page, comment, user, term, media item, setting, plugin and theme, before and "
            "after): the asked-for change must be there, and any other change is a wrong effect "
            "(the task fails, and counts twice in the score). Questions are judged by the facts "
            "in the answer; requests nothing can do must be declined with nothing changed. "
            "Times run from submitting the request to the turn's end (setup and judging "
            "excluded); model calls are the run's own count.",
            "",
            summary(results),
            "",
            "Failures by cause (`bench/tasks/judge.py`: a made-up id is an id that names "
            "nothing on the site; wrong action: an action the request does not call for, or "
            "none; wrong params: the right action, with the wrong target or values; claimed: the "
            "answer says it is done when it is not):",
            "",
            causes(results),
            "",
            areas(results),
            "",
            per_task(results),
            "",
        ]
    )
