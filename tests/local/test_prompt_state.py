"""The system prompt's saved state: `prepare` builds it once for the default catalog, `pressloop
doctor` says whether it is there, and a state that is missing or unreadable only makes the first
answer slower (it is read again and saved again)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from pressloop.actions.registry import Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS
from pressloop.config import Settings
from pressloop.contracts import DecisionProtocol, Message, Role
from pressloop.engine.decision_parser import decision_schema, parse_json_decision
from pressloop.engine.ports import PromptContext
from pressloop.engine.prompt import system_prompt
from pressloop.providers.base import ModelRequest
from pressloop.providers.local import build_local_provider
from pressloop.providers.local.messages import stable_count, to_messages
from pressloop.providers.local.model import LocalModel
from pressloop.providers.local.model_file import ModelPlace, prepare
from pressloop.providers.local.options import ModelOptions
from pressloop.providers.local.prefix import read_header
from pressloop.providers.local.provider import LocalProvider
from pressloop.providers.local.schema import grammar_schema
from tests.local.conftest import MODEL_TEST_TIMEOUT_S, Prepared, load_with_model, run_prepare
from tests.support.processes import ISOLATED, command


def states(settings: Settings) -> dict[str, int]:
    """The saved states in a data directory: file name -> mtime."""
    folder = settings.data_dir / "models" / "prefix-states"
    return {p.name: p.stat().st_mtime_ns for p in folder.glob("*.kv")}


def doctor_line(settings: Settings) -> tuple[str, str]:
    """`pressloop doctor`'s local model line (and its hint) for this data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSLOOP_")}
    env = {k: v for k, v in env.items() if k not in ISOLATED}
    env.update(
        PRESSLOOP_DATA_DIR=str(settings.data_dir),
        PRESSLOOP_MODEL_CACHE=str(settings.model_cache),
        PRESSLOOP_PROVIDER="local",
        COLUMNS="400",
    )
    done = subprocess.run(
        [*command(), "doctor"], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    lines = done.stdout.splitlines()
    at = next((i for i, x in enumerate(lines) if "local model:" in x), None)
    assert at is not None, done.stdout + done.stderr
    hint = lines[at + 1] if at + 1 < len(lines) and "hint:" in lines[at + 1] else ""
    return lines[at], hint


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
def test_prepare_saves_the_default_catalogs_prompt_state_once(prepared: Prepared) -> None:
    assert "reading the system prompt once" in prepared.output, prepared.output
    assert "Saved the system prompt's state" in prepared.output, prepared.output
    saved = states(prepared.settings)
    assert len(saved) == 1, saved
    (name,) = saved
    size = (prepared.settings.data_dir / "models" / "prefix-states" / name).stat().st_size
    assert size > 1_000_000  # the KV cache of about 2,000 tokens, not an empty file

    again = run_prepare(prepared.settings)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "already saved" in again.stderr, again.stderr
    assert "reading the system prompt" not in again.stderr
    assert states(prepared.settings) == saved  # not rebuilt


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
def test_doctor_says_whether_the_current_catalogs_state_is_saved(
    prepared: Prepared, local_settings: Settings, tmp_path: Path
) -> None:
    line, hint = doctor_line(prepared.settings)
    assert line.split()[0] == "ok", line
    assert "built (llama-cpp-python" in line and "hash ok" in line and "loads in" in line
    assert "saved prompt state for the current catalog" in line, line
    assert "llama.cpp CPU variant" in line and "matches this machine" in line, line

    # The model file is there (linked from the cache) but the state was never saved.
    bare = local_settings.model_copy(update={"data_dir": tmp_path})
    prepare(ModelPlace.from_settings(bare))
    line, hint = doctor_line(bare)
    assert line.split()[0] == "warn", line
    assert "no saved prompt state for the current catalog" in line, line
    assert "python -m pressloop.local_model prepare" in hint, hint

    # The state prepared on a machine whose CPU took another variant (the data directory
    # copied over): doctor says it does not match, and it is not loaded.
    (state,) = (prepared.settings.data_dir / "models" / "prefix-states").glob("*.kv")
    magic, header, rest = state.read_bytes().split(b"\n", 2)
    elsewhere = {**json.loads(header), "cpu_variant": "sapphirerapids-elsewhere"}
    copied = bare.data_dir / "models" / "prefix-states" / state.name
    copied.parent.mkdir(parents=True, exist_ok=True)
    copied.write_bytes(magic + b"\n" + json.dumps(elsewhere).encode() + b"\n" + rest)
    line, hint = doctor_line(bare)
    assert line.split()[0] == "warn", line
    assert "does not match this machine" in line, line
    assert "cpu_variant 'sapphirerapids-elsewhere'" in line, line
    assert "python -m pressloop.local_model prepare" in hint, hint


def small_request() -> ModelRequest:
    entries = Registry([s for s in WORDPRESS_ACTIONS if s.name == "list_plugins"]).catalog()
    return ModelRequest(
        system=system_prompt(PromptContext(), entries, DecisionProtocol.JSON),
        messages=[Message(role=Role.USER, content="List the installed plugins")],
        response_schema=decision_schema([(e.name, e.params_schema) for e in entries]),
    )


def answer(model: LocalModel, request: ModelRequest) -> str:
    assert request.response_schema is not None
    messages = to_messages(request, late_system=model.takes_late_system())
    return model.generate(
        [{"role": m["role"], "content": m["content"]} for m in messages],
        schema_json=json.dumps(grammar_schema(request.response_schema)),
        max_tokens=200,
        stable=stable_count(messages),
    ).text


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
def test_an_unreadable_saved_state_is_read_again_and_saved_again(
    local_settings: Settings, tmp_path: Path
) -> None:
    path = ModelPlace.from_settings(local_settings).installed
    options = ModelOptions(
        path=path,
        threads=local_settings.local_threads,
        context_tokens=local_settings.local_context_tokens,
        batch_tokens=local_settings.local_batch_tokens,
        prefix_dir=tmp_path / "states",
    )
    request = small_request()
    model = LocalModel(options)
    try:
        messages = to_messages(request, late_system=model.takes_late_system())
        stable = [
            {"role": m["role"], "content": m["content"]} for m in messages[: stable_count(messages)]
        ]
        saved = model.prefix_state(stable)
        assert saved is not None
        saved.parent.mkdir(parents=True)
        saved.write_bytes(b"not a llama.cpp state")  # e.g. from another llama.cpp version
        first = answer(model, request)
        assert model.prefix_restored == 0
    finally:
        model.close()
    assert [a.name for a in parse_json_decision(first).actions] == ["list_plugins"], first
    assert saved.stat().st_size > 100_000  # evaluated and saved again

    restarted = LocalModel(options)
    try:
        second = answer(restarted, request)
        assert restarted.prefix_restored == 1  # the next start finds the state saved again
    finally:
        restarted.close()
    assert [a.name for a in parse_json_decision(second).actions] == ["list_plugins"], second


def best_variant(settings: Settings) -> tuple[str, dict[str, int]]:
    """The variant the model process runs here (the best whose probe passes), and the scores."""
    report = load_with_model(ModelPlace.from_settings(settings).installed)
    return str(report["variant"]), dict(report["offered"])


async def decide_once(settings: Settings) -> LocalProvider:
    """One decision through the model's own process, as the service asks; the provider closed."""
    provider = build_local_provider(settings)
    try:
        response = await provider.complete(small_request())
    finally:
        await provider.aclose()
    assert [a.name for a in parse_json_decision(response.text).actions] == ["list_plugins"]
    return provider


@pytest.mark.timeout(MODEL_TEST_TIMEOUT_S)
async def test_a_state_saved_under_another_cpu_variant_or_llama_cpp_is_refused_and_rebuilt(
    local_settings: Settings, tmp_path: Path
) -> None:
    best, offered = best_variant(local_settings)
    # Another variant this CPU runs, fast enough to read a prompt (AVX2 on every x86-64 server
    # of the last decade; on arm64 the plain armv8.0 build).
    other = next(
        (v for v in ("haswell", "sse42", "armv8.0_1", "armv8.2_1") if offered.get(v) and v != best),
        None,
    )
    assert other is not None, offered
    settings = local_settings.model_copy(update={"data_dir": tmp_path, "local_cpu_variant": other})
    prepare(ModelPlace.from_settings(settings))
    written = await decide_once(settings)  # reads the prompt, saves its state
    assert written.prefix_restored == 0
    (saved,) = (tmp_path / "models" / "prefix-states").glob("*.kv")
    assert read_header(saved)["cpu_variant"] == other  # type: ignore[index]

    here = settings.model_copy(update={"local_cpu_variant": None})
    refused = await decide_once(here)
    assert refused.prefix_restored == 0  # never loaded
    assert refused.prefix_refused is not None and f"cpu_variant {other!r}" in refused.prefix_refused
    header = read_header(saved)
    assert header is not None and header["cpu_variant"] == best  # rebuilt for this machine

    # The same state claimed by another llama.cpp version: refused too.
    data = saved.read_bytes()
    magic, header_line, state = data.split(b"\n", 2)
    claimed = {**json.loads(header_line), "llama_cpp": "0.0.1"}
    saved.write_bytes(magic + b"\n" + json.dumps(claimed).encode() + b"\n" + state)
    refused = await decide_once(here)
    assert refused.prefix_restored == 0
    assert refused.prefix_refused is not None and "llama_cpp '0.0.1'" in refused.prefix_refused

    restored = await decide_once(here)  # the state rebuilt just now is the one loaded
    assert restored.prefix_restored == 1, restored.prefix_refused
