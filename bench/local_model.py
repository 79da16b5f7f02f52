"""The local model's speed on this machine: load time, time to the first decision (from a cold
start and from a start that finds the system prompt's saved state), decisions per minute,
tokens per second and peak memory, with and without prefix-cache reuse.

Each decision is one real request as the engine builds it for the JSON decision protocol: the
WordPress pack's catalog in the system prompt, the decision grammar, one request from the
issue's smoke set. The model is the one `make run` prepares (PRESSLOOP_MODEL_CACHE).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from statistics import median

from common import table, write_section

from pressloop.actions.registry import Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS
from pressloop.config import Settings
from pressloop.contracts import DecisionProtocol
from pressloop.engine.decision_parser import decision_schema
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.local_model import ModelPlace, prepare
from pressloop.local_model.state import llama_runtime
from pressloop.providers.local.catalog import compact_catalog
from pressloop.providers.local.model import Generation, LocalModel, ModelOptions
from pressloop.providers.local.schema import grammar_schema

START_MARKER = "<!-- local_model:start -->"
END_MARKER = "<!-- local_model:end -->"
REQUESTS = [
    "Create a draft post titled Spring opening hours",
    "Delete the user with the email bob@example.com",
    "List the installed plugins",
    "Which users are editors on this site?",
    "Change the title of post 12 to Our new menu",
    "Set post 7 back to draft",
    "What's the weather like in Paris today?",
    "Tell me a joke",
    "Write a new blog post called Summer recipes and keep it as a draft",
    "Show me which plugins are active",
]
GOAL_FIRST_S = 10.0
GOAL_LATER_S = 4.0


@dataclass(kw_only=True)
class Start:
    load_s: float
    first_s: float  # from the start (load included) to the first decision
    first: Generation


def decision_inputs() -> tuple[str, str]:
    entries = Registry(WORDPRESS_ACTIONS).catalog()
    system = compact_catalog(system_prompt(PromptContext(), entries, DecisionProtocol.JSON))
    schema = grammar_schema(decision_schema([(e.name, e.params_schema) for e in entries]))
    return system, json.dumps(schema)


def decide(model: LocalModel, system: str, schema: str, text: str, max_tokens: int) -> Generation:
    messages = [{"role": "system", "content": system}, {"role": "user", "content": text}]
    return model.generate(messages, schema_json=schema, max_tokens=max_tokens)


def start(
    options: ModelOptions, system: str, schema: str, max_tokens: int
) -> tuple[Start, LocalModel]:
    began = time.monotonic()
    model = LocalModel(options)
    model.load()
    load_s = time.monotonic() - began
    first = decide(model, system, schema, REQUESTS[0], max_tokens)
    return Start(load_s=load_s, first_s=time.monotonic() - began, first=first), model


def series(
    model: LocalModel, system: str, schema: str, count: int, max_tokens: int, *, reuse: bool
) -> list[Generation]:
    out = []
    kept = model.prefixes
    if not reuse:
        model.prefixes = None  # nor restored from disk: the whole prompt is read each time
    for n in range(count):
        if not reuse:
            model.forget_prefix()
        out.append(decide(model, system, schema, REQUESTS[(n + 1) % len(REQUESTS)], max_tokens))
    model.prefixes = kept
    return out


def row(name: str, runs: Sequence[Generation]) -> list[str]:
    seconds = [g.seconds for g in runs]
    tokens = sum(g.completion_tokens for g in runs)
    return [
        name,
        str(len(runs)),
        f"{median(seconds):.2f}",
        f"{max(seconds):.2f}",
        f"{60 / median(seconds):.1f}",
        f"{tokens / sum(seconds):.1f}",
        f"{median(g.prompt_tokens for g in runs):.0f}",
    ]


def run(options: argparse.Namespace) -> str:
    settings = Settings()
    path = prepare(ModelPlace.from_settings(settings))
    system, schema = decision_inputs()
    threads = settings.local_threads or os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as states:
        model_options = ModelOptions(
            path=path,
            threads=settings.local_threads,
            context_tokens=settings.local_context_tokens,
            batch_tokens=settings.local_batch_tokens,
            prefix_dir=Path(states),
        )
        cold, model = start(model_options, system, schema, options.max_tokens)
        model.close()  # a restart: the next start finds the saved system prompt state
        warm, model = start(model_options, system, schema, options.max_tokens)
        reused = series(model, system, schema, options.decisions, options.max_tokens, reuse=True)
        fresh = series(model, system, schema, options.decisions, options.max_tokens, reuse=False)
        prefix_tokens = len(
            model._tokens([{"role": "system", "content": system}], generation_prompt=False)
        )
        model.close()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    prompt_rate = prefix_tokens / max(cold.first.seconds, 1e-9)
    later = median(g.seconds for g in reused)
    verdict = (
        f"first decision {'met' if warm.first_s <= GOAL_FIRST_S else 'missed'} on a start that "
        f"finds the saved prompt state ({warm.first_s:.1f} s; cold: {cold.first_s:.1f} s), later "
        f"decisions {'met' if later <= GOAL_LATER_S else 'missed'} ({later:.1f} s median)"
    )
    return "\n".join(
        [
            "## Local model (llama.cpp, offline)",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{options.command}`.",
            "",
            *[f"- {fact}" for fact in facts(options.load, path, threads)],
            "",
            "Each decision is a real JSON-protocol request: the WordPress pack's catalog (compact "
            f"signatures, {prefix_tokens} prompt tokens before the request), the decision grammar, "
            "greedy decoding, one request from the issue's smoke set. A cold start finds no saved "
            "state and reads the whole system prompt; a warm start (a restart) restores the "
            "system prompt's state saved by the cold one.",
            "",
            table(
                ["start", "load (s)", "first decision after start (s)", "prompt tokens evaluated"],
                [
                    ["cold", f"{cold.load_s:.1f}", f"{cold.first_s:.1f}", str(prefix_tokens)],
                    [
                        "warm (saved state)",
                        f"{warm.load_s:.1f}",
                        f"{warm.first_s:.1f}",
                        "the request only",
                    ],
                ],
            ),
            "",
            table(
                [
                    "later decisions",
                    "n",
                    "median (s)",
                    "max (s)",
                    "decisions/min",
                    "output tokens/s",
                    "prompt tokens",
                ],
                [row("prefix reused", reused), row("no reuse (whole prompt each time)", fresh)],
            ),
            "",
            f"Prompt reading speed (cold start): {prompt_rate:.0f} tokens/s. "
            f"Reuse speed-up per decision: {median(g.seconds for g in fresh) / later:.1f}x. "
            f"Peak memory (RSS) of the process: {peak_mib:,.0f} MiB (two starts, one at a time).",
            "",
            f"Goals: first decision within {GOAL_FIRST_S:g} s of start, later decisions within "
            f"{GOAL_LATER_S:g} s: {verdict}.",
            "",
        ]
    )


def facts(load: tuple[float, float, float], path: Path, threads: int) -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    cpu = "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        cpu = next((x.split(":", 1)[1].strip() for x in info if x.startswith("model name")), cpu)
    return [
        f"code: {commit or 'unknown'} (at the start of the run)",
        f"CPU: {cpu}, nproc {len(os.sched_getaffinity(0))}, llama.cpp threads {threads}",
        f"Python {platform.python_version()}, {llama_runtime()}",
        f"model: {path.name} ({path.stat().st_size / 1e9:.2f} GB)",
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in load),
    ]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=10, help="decisions per series")
    parser.add_argument("--max-tokens", type=int, default=Settings().local_max_tokens)
    parser.add_argument("--write", type=Path, help="replace this section of a Markdown file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    options.command = "python " + shlex.join(sys.argv)
    options.load = os.getloadavg()
    section = run(options)
    print(section)
    if options.write is not None:
        write_section(options.write, section, start=START_MARKER, end=END_MARKER)
        print(f"wrote {options.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
