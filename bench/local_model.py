"""The local model's speed on this machine: load time, time to the first decision after a start
(with the system prompt's state saved by `python -m pressloop.local_model prepare`, and with no
saved state at all), decisions per minute, tokens per second and peak memory, with and without
prefix-cache reuse; and llama.cpp's CPU backends compared (`local_backends.py`): the variant the
package picks, the fixed AVX2 baseline and a native build.

Each decision is one real request as the service sends it for the JSON decision protocol: the
catalog `pressloop serve` uses by default (built-in actions and the WordPress pack) and the
worked examples in the stable prefix, a site's context after them, the decision grammar, one
request from the issue's smoke set. The model is the one `make run` prepares
(PRESSLOOP_MODEL_CACHE); the llama.cpp settings are the provider's.
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
from typing import Any

import llama_cpp
from common import table, write_section
from llama_cpp.llama_grammar import LlamaGrammar
from local_backends import compare, cpu_flags_line

from pressloop.actions.registry import Registry
from pressloop.config import Settings
from pressloop.contracts import DecisionProtocol, Message, Role
from pressloop.engine.decision_parser import decision_schema
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.local_model.prompt import default_system_prompt
from pressloop.providers.base import ModelRequest
from pressloop.providers.local.gbnf import schema_to_gbnf
from pressloop.providers.local.generation import Generation
from pressloop.providers.local.messages import stable_count, to_messages
from pressloop.providers.local.model import LocalModel
from pressloop.providers.local.model_file import ModelPlace, prepare
from pressloop.providers.local.model_file.state import llama_runtime
from pressloop.providers.local.options import ModelOptions
from pressloop.providers.local.prompt_state import ensure_prompt_state
from pressloop.providers.local.schema import grammar_schema
from pressloop.runtime.wiring import default_actions

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
# What SITE_CONTEXT holds for the local WordPress `make run` starts (after the examples).
SITE_CONTEXT = (
    "Site: Pressloop test site (http://127.0.0.1:8781)\n"
    "Description: Just another WordPress site\n"
    "Post types: attachment, nav_menu_item, page, post, wp_block, wp_navigation, wp_template\n"
    "Plugins: Akismet Anti-spam [akismet/akismet] inactive; Hello Dolly [hello] inactive\n"
    "Themes: twentytwentythree (active: twentytwentythree)"
)


@dataclass(kw_only=True)
class Start:
    load_s: float
    first_s: float  # from the start (load included) to the first decision
    first: Generation
    restored: bool  # the first decision found the system prompt's saved state


def request_for(settings: Settings, text: str) -> ModelRequest:
    """A first-round request as the service's engine builds it for the default catalog."""
    entries = Registry(default_actions(settings.action_packs, wordpress=True)).catalog()
    return ModelRequest(
        system=system_prompt(
            PromptContext(site_context=SITE_CONTEXT), entries, DecisionProtocol.JSON
        ),
        messages=[Message(role=Role.USER, content=text)],
        response_schema=decision_schema([(e.name, e.params_schema) for e in entries]),
    )


def decide(model: LocalModel, settings: Settings, text: str, max_tokens: int) -> Generation:
    """One decision, as the local provider makes it."""
    request = request_for(settings, text)
    assert request.response_schema is not None
    messages = to_messages(request, late_system=model.takes_late_system())
    return model.generate(
        [{"role": m["role"], "content": m["content"]} for m in messages],
        schema_json=json.dumps(grammar_schema(request.response_schema)),
        max_tokens=max_tokens,
        stable=stable_count(messages),
    )


def start(options: ModelOptions, settings: Settings, max_tokens: int) -> tuple[Start, LocalModel]:
    began = time.monotonic()
    model = LocalModel(options)
    model.load()
    load_s = time.monotonic() - began
    first = decide(model, settings, REQUESTS[0], max_tokens)
    restored = model.prefix_restored > 0
    return Start(
        load_s=load_s, first_s=time.monotonic() - began, first=first, restored=restored
    ), model


def series(
    model: LocalModel, settings: Settings, count: int, max_tokens: int, *, reuse: bool
) -> list[Generation]:
    out = []
    kept = model.prefixes
    if not reuse:
        model.prefixes = None  # nor restored from disk: the whole prompt is read each time
    for n in range(count):
        if not reuse:
            model.forget_prefix()
        out.append(decide(model, settings, REQUESTS[(n + 1) % len(REQUESTS)], max_tokens))
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


def start_row(name: str, begun: Start, evaluated: str) -> list[str]:
    return [
        name,
        f"{begun.load_s:.1f}",
        f"{begun.first_s:.1f}",
        "yes" if begun.restored else "no",
        evaluated,
    ]


# llama.cpp settings tried against the provider's (--tuning). Prompt tokens per CPU-second show
# the cost even when other work takes cores (generation suffers most from that).
TUNING: list[tuple[str, dict[str, object]]] = [
    ("as shipped", {}),
    ("flash_attn on", {"flash_attn": True}),
    ("n_batch = n_ubatch = 1024", {"n_batch": 1024, "n_ubatch": 1024}),
    ("n_ubatch 256", {"n_ubatch": 256}),
    ("K and V cache in q8_0 (flash_attn on)", {"flash_attn": True, "type_k": 8, "type_v": 8}),
    ("1 thread (prompt and generation)", {"n_threads": 1, "n_threads_batch": 1}),
    ("as shipped (again: the machine's drift)", {}),
]


def tuning_rows(model: LocalModel, settings: Settings, max_tokens: int) -> list[list[str]]:
    request = request_for(settings, REQUESTS[1])
    assert request.response_schema is not None
    messages = to_messages(request, late_system=model.takes_late_system())
    prompt = model._tokens(messages, generation_prompt=True)
    grammar_text = schema_to_gbnf(grammar_schema(request.response_schema))
    threads, batch, ubatch, flash = model.tuning()
    shipped = {"n_threads": threads, "n_threads_batch": threads, "flash_attn": flash}
    shipped |= {"n_batch": batch, "n_ubatch": ubatch}
    rows = []
    for label, changes in TUNING:
        began = time.monotonic()
        llama = llama_cpp.Llama(
            model_path=str(model.options.path),
            n_ctx=model.options.context_tokens,
            verbose=False,
            **{**shipped, **changes},  # type: ignore[arg-type]
        )
        load_s = time.monotonic() - began
        wall, cpu = time.monotonic(), time.process_time()
        llama.eval(prompt)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        grammar = LlamaGrammar.from_string(grammar_text, verbose=False)
        generating = time.monotonic()
        answer: Any = llama.create_completion(
            prompt=prompt,
            grammar=grammar,
            max_tokens=max_tokens,
            temperature=0.0,
            repeat_penalty=1.0,
        )
        generating = time.monotonic() - generating
        produced = int(answer["usage"]["completion_tokens"])
        llama.close()
        rows.append(
            [
                label,
                f"{load_s:.1f}",
                f"{len(prompt) / wall:.0f}",
                f"{len(prompt) / cpu:.0f}",
                f"{produced / generating:.1f}",
                f"{os.getloadavg()[0]:.1f}",
            ]
        )
    return rows


def run(options: argparse.Namespace) -> str:
    settings = Settings()
    path = prepare(ModelPlace.from_settings(settings))
    with tempfile.TemporaryDirectory() as empty, tempfile.TemporaryDirectory() as prepared:

        def model_options(states: str) -> ModelOptions:
            return ModelOptions(
                path=path,
                threads=settings.local_threads,
                context_tokens=settings.local_context_tokens,
                batch_tokens=settings.local_batch_tokens,
                prefix_dir=Path(states),
            )

        # What `python -m pressloop.local_model prepare` does, in a process of its own.
        preparing = LocalModel(model_options(prepared))
        state = ensure_prompt_state(preparing, default_system_prompt(settings.action_packs))
        preparing.close()
        after_prepare, model = start(model_options(prepared), settings, options.max_tokens)
        model.close()
        cold, model = start(model_options(empty), settings, options.max_tokens)
        reused = series(model, settings, options.decisions, options.max_tokens, reuse=True)
        fresh = series(model, settings, options.fresh_decisions, options.max_tokens, reuse=False)
        threads, batch, ubatch, flash = model.tuning()
        tuned = tuning_rows(model, settings, options.max_tokens) if options.tuning else []
        model.close()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    compared: list[str] = []
    if options.backend_rounds > 0:
        found = compare(
            model=path,
            rounds=options.backend_rounds,
            decisions=options.backend_decisions,
            max_tokens=options.max_tokens,
        )
        compared = found.text(options.backend_rounds, options.backend_decisions)
    prompt_rate = state.tokens / max(state.seconds, 1e-9)
    later = median(g.seconds for g in reused)
    verdict = (
        f"first decision {'met' if after_prepare.first_s <= GOAL_FIRST_S else 'missed'} on the "
        f"first start after `prepare` ({after_prepare.first_s:.1f} s), "
        f"{'met' if cold.first_s <= GOAL_FIRST_S else 'missed'} with no saved state at all "
        f"({cold.first_s:.1f} s); later decisions "
        f"{'met' if later <= GOAL_LATER_S else 'missed'} ({later:.1f} s median)"
    )
    settings_line = (
        f"llama.cpp settings: n_threads {threads}, n_threads_batch {threads}, n_batch {batch}, "
        f"n_ubatch {ubatch}, flash_attn {'on' if flash else 'off'}, use_mmap on."
    )
    return "\n".join(
        [
            "## Local model (llama.cpp, offline)",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{options.command}`.",
            "",
            *[f"- {fact}" for fact in facts(options.load, path, threads)],
            "",
            "Each decision is a real JSON-protocol request as the service sends it: the catalog "
            "`pressloop serve` uses by default (built-in actions and the WordPress pack, compact "
            f"signatures) and the worked examples as the stable prefix ({state.tokens} tokens), "
            "then the site's context and one request from the issue's smoke set; the decision "
            "grammar, greedy decoding. " + settings_line,
            "",
            "Starts: *first start after prepare* finds the prefix state that "
            "`python -m pressloop.local_model prepare` (run by `make run`) saved "
            f"({state.seconds:.1f} s to build, once); *no saved state* reads the whole prefix "
            "(a catalog changed since, or `prepare` not run; that start saves the state for the "
            "next one). The time runs from creating the model (the process already started) to "
            "the first decision.",
            "",
            table(
                [
                    "start",
                    "load (s)",
                    "first decision after start (s)",
                    "saved state restored",
                    "tokens evaluated before answering",
                ],
                [
                    start_row(
                        "first start after prepare",
                        after_prepare,
                        f"{after_prepare.first.prompt_tokens - state.tokens} (site + request)",
                    ),
                    start_row("no saved state at all", cold, str(cold.first.prompt_tokens)),
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
            f"Prompt reading speed (building the saved state): {prompt_rate:.0f} tokens/s. "
            f"Reuse speed-up per decision: {median(g.seconds for g in fresh) / later:.1f}x. "
            f"Peak memory (RSS) of the process: {peak_mib:,.0f} MiB (three starts, one at a "
            "time).",
            "",
            f"Goals: first decision within {GOAL_FIRST_S:g} s of start, later decisions within "
            f"{GOAL_LATER_S:g} s: {verdict}.",
            "",
            *compared,
            *tuning_text(tuned),
        ]
    )


def tuning_text(rows: list[list[str]]) -> list[str]:
    if not rows:
        return []
    header = [
        "llama.cpp settings",
        "load (s)",
        "prompt tokens/s",
        "prompt tokens per CPU-second",
        "output tokens/s",
        "load average after",
    ]
    return [
        "Settings tried (`--tuning`): each row loads the model with the provider's settings "
        "but the one named, reads the first decision's whole prompt, then answers it.",
        "",
        table(header, rows),
        "",
    ]


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
        cpu_flags_line(),
        f"Python {platform.python_version()}, {llama_runtime()}",
        f"model: {path.name} ({path.stat().st_size / 1e9:.2f} GB)",
        "load average before the run (1, 5, 15 min): " + ", ".join(f"{v:.2f}" for v in load),
    ]


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--decisions", type=int, default=10, help="later decisions with the prefix reused"
    )
    parser.add_argument(
        "--fresh-decisions",
        type=int,
        default=2,
        help="later decisions reading the whole prompt each time (each takes a minute)",
    )
    parser.add_argument("--max-tokens", type=int, default=Settings().local_max_tokens)
    parser.add_argument(
        "--tuning", action="store_true", help="also try other llama.cpp settings (a minute each)"
    )
    parser.add_argument(
        "--backend-rounds",
        type=int,
        default=2,
        help="interleaved rounds comparing llama.cpp's CPU backends (0: none)",
    )
    parser.add_argument(
        "--backend-decisions", type=int, default=6, help="timed decisions per round and backend"
    )
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
