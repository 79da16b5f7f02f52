"""The everyday-task benchmark: requests a site owner makes, run through Pressloop on a real local
WordPress, judged by reading the site back. Writes its section of docs/benchmarks.md.

    python -m bench.tasks --out docs/benchmarks.md          # every task, the local model
    python -m bench.tasks --only draft_post,site_title       # some tasks
    python -m bench.tasks --tasks 5                          # the first five
    python -m bench.tasks --provider openai                  # any configured provider
    python -m bench.tasks --provider scripted                # self-test: scripted right answers
    python -m bench.tasks --provider scripted --script idle  # self-test: "done", doing nothing
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import code_version, machine_facts, write_section
from bench.tasks import report
from bench.tasks.calls import Recording, describe
from bench.tasks.catalog import BY_NAME, TASKS
from bench.tasks.model import Result, Task
from bench.tasks.runner import OracleProvider, ProviderFor, run_task
from pressloop.config import Settings
from pressloop.local_wordpress import LocalSite
from pressloop.providers.base import Provider
from pressloop.providers.scripted import ScriptedProvider

IDLE_ANSWER = "Done, all taken care of."


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, help="run only the first N tasks")
    parser.add_argument("--only", help="run only these tasks (comma-separated names)")
    parser.add_argument(
        "--provider",
        default=os.environ.get("PRESSLOOP_PROVIDER") or "local",
        help="local (default), scripted (the harness's self-test), or any configured provider",
    )
    parser.add_argument(
        "--script",
        choices=["oracle", "idle"],
        default="oracle",
        help="scripted provider: the right answers (every task must pass) or an answer that "
        "claims success and does nothing (every task must fail, with no wrong effect)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per task")
    parser.add_argument("--out", type=Path, help="replace this benchmark's section of a file")
    parser.add_argument("--list", action="store_true", help="list the tasks and exit")
    options = parser.parse_args(argv)
    options.selected = select(parser, options)
    return options


def select(parser: argparse.ArgumentParser, options: argparse.Namespace) -> list[Task]:
    chosen = TASKS
    if options.only:
        names = [n.strip() for n in options.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in BY_NAME]
        if unknown:
            parser.error(f"unknown tasks: {', '.join(unknown)}")
        chosen = [BY_NAME[n] for n in names]
    if options.tasks is not None:
        chosen = chosen[: options.tasks]
    return chosen


def providers(options: argparse.Namespace) -> tuple[Settings, ProviderFor, Any, str]:
    """The base settings, how each task gets its provider, what to close, and its label."""
    if options.provider == "scripted":
        base = Settings(provider="scripted")
        if options.script == "idle":
            return base, lambda t, f: ScriptedProvider([{"text": IDLE_ANSWER}]), None, "idle"

        def oracle(task: Task, facts: dict[str, Any]) -> Provider:
            return OracleProvider(task.oracle(facts))

        return base, oracle, None, "scripted (each task's right answers)"
    base = Settings(provider=options.provider)
    if options.provider == "local":
        from pressloop.providers.local import build_local_provider

        prepare_local_model()
        shared: Any = Recording(build_local_provider(base))
    else:
        from pressloop.providers.factory import build_provider

        shared = build_provider(base)
    label = f"{options.provider}, model {shared.model}"
    return base, lambda t, f: shared, shared, label


def prepare_local_model() -> None:
    """What `make run` does before it serves: the model in the data directory and the system
    prompt's saved state (skipped when already there), so no task pays for reading the prompt."""
    env = {**os.environ, "PRESSLOOP_PROVIDER": "local"}
    done = subprocess.run(
        [sys.executable, "-m", "pressloop.local_model", "prepare"], env=env, check=False
    )
    if done.returncode:
        raise SystemExit("the local model could not be prepared (see above)")


async def close(provider: Any) -> None:
    if provider is None:
        return
    closing = getattr(provider, "aclose", None)
    if closing is not None:
        await closing()
    elif callable(getattr(provider, "close", None)):
        provider.close()


async def run(options: argparse.Namespace, site: LocalSite) -> tuple[list[Result], str]:
    base, provider_for, shared, label = providers(options)
    results: list[Result] = []
    try:
        loading = getattr(shared, "load", None)
        if loading is not None:  # the local model: loaded before the first task is timed
            print(f"model loaded in {await loading():.1f} s", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="pressloop-tasks-") as work:
            for number, task in enumerate(options.selected, 1):
                result = await run_task(
                    task,
                    site=site,
                    provider_for=provider_for,
                    base=base,
                    workdir=Path(work),
                    timeout_s=options.timeout,
                )
                results.append(result)
                verdict = "pass" if result.passed else f"FAIL ({result.cause})"
                extra = f" [{result.detail}]" if result.detail else ""
                wrong = (
                    f" wrong effect: {'; '.join(result.unexpected)}" if result.wrong_effect else ""
                )
                calls = describe(shared.take()) if isinstance(shared, Recording) else ""
                print(
                    f"[{number}/{len(options.selected)}] {task.name}: {verdict} "
                    f"{result.seconds:.1f} s, {result.model_calls} model calls, "
                    f"{' '.join(result.actions) or 'no actions'}{extra}{wrong}"
                    + (f"\n    calls: {calls}" if calls else "")
                    + (
                        "".join(f"\n    step: {t}" for t in result.trace)
                        + f"\n    answer: {result.answer[:300]!r}"
                        if not result.passed
                        else ""
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        await close(shared)
    return results, label


def self_test_verdict(options: argparse.Namespace, results: Sequence[Result]) -> str | None:
    if options.provider != "scripted":
        return None
    if options.script == "oracle":
        wrong = [r.task.name for r in results if not r.passed]
        return (
            "self-test passed: every right answer is judged right"
            if not wrong
            else (f"SELF-TEST FAILED: right answers judged wrong: {', '.join(wrong)}")
        )
    wrong = [r.task.name for r in results if r.passed or r.wrong_effect]
    return (
        "self-test passed: doing nothing fails every task, with no wrong effect"
        if not wrong
        else (f"SELF-TEST FAILED: doing nothing passed or changed the site: {', '.join(wrong)}")
    )


def main(argv: Sequence[str] | None = None) -> int:
    options = parse(sys.argv[1:] if argv is None else argv)
    if options.list:
        for task in TASKS:
            print(f"{task.name:28} {task.area:11} {task.kind:9} {task.summary}")
        return 0
    command = "python -m bench.tasks " + shlex.join(sys.argv[1:] if argv is None else argv)
    load, code = os.getloadavg(), code_version()
    when = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    with LocalSite() as site:
        site.snapshot()
        results, label = asyncio.run(run(options, site))
    facts = machine_facts(load, code, code_version())[:3] + machine_facts(load, code)[4:]
    section = report.section(results, command=command, when=when, provider=label, facts=facts)
    print(section)
    verdict = self_test_verdict(options, results)
    if verdict:
        print(verdict, file=sys.stderr)
    if options.out is not None:
        write_section(options.out, section, start=report.START_MARKER, end=report.END_MARKER)
        print(f"wrote {options.out}", file=sys.stderr)
    return 1 if verdict and verdict.startswith("SELF-TEST FAILED") else 0


if __name__ == "__main__":
    sys.exit(main())
