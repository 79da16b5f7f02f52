"""Asking for the local provider: what the person sees when something is missing or wrong, and
what `pressloop doctor` and `make run`'s helper say about the local model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.providers.factory import build_provider
from pressloop.providers.local.model_file import DEFAULT_SOURCE
from tests.local.conftest import Prepared
from tests.support.processes import ISOLATED, command

MISSING_GROUP_PROBE = """
import sys
sys.modules["llama_cpp"] = None  # what Python sees when the `local` group is not installed
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.providers.factory import build_provider
try:
    build_provider(Settings(provider="local"))
except ConfigurationError as problem:
    print(problem.message)
    sys.exit(3)
"""


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith("PRESSLOOP_") and k not in ISOLATED
    }
    env.update(extra)
    return env


def test_a_missing_local_group_names_the_command_that_installs_it(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MISSING_GROUP_PROBE],
        capture_output=True,
        text=True,
        env=clean_env(PRESSLOOP_DATA_DIR=str(tmp_path)),
        timeout=60,
        check=False,
    )
    assert done.returncode == 3, done.stdout + done.stderr
    assert "llama-cpp-python" in done.stdout
    assert "make run" in done.stdout and "uv sync --group local" in done.stdout


def test_a_model_file_that_is_not_the_expected_one_is_refused(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    (models / DEFAULT_SOURCE.filename).write_bytes(b"GGUF but not the model we expect")
    with pytest.raises(ConfigurationError) as refused:
        build_provider(Settings(data_dir=tmp_path, provider="local"))
    assert "is not the expected model file" in refused.value.message
    assert f"{DEFAULT_SOURCE.size:,} bytes" in refused.value.message


def test_a_model_that_was_never_prepared_says_how_to_prepare_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as missing:
        build_provider(Settings(data_dir=tmp_path, provider="local"))
    assert "python -m pressloop.local_model prepare" in missing.value.message


def test_make_run_uses_the_local_model_only_without_a_key(tmp_path: Path) -> None:
    def needed(**extra: str) -> int:
        return subprocess.run(
            [sys.executable, "-m", "pressloop.local_model", "needed"],
            env=clean_env(PRESSLOOP_DATA_DIR=str(tmp_path), **extra),
            cwd=tmp_path,
            timeout=60,
            check=False,
        ).returncode

    assert needed() == 0
    assert needed(OPENAI_API_KEY="sk-test") == 1
    assert needed(PRESSLOOP_PROVIDER="scripted") == 1
    assert needed(PRESSLOOP_PROVIDER="local", ANTHROPIC_API_KEY="sk-test") == 0


def test_doctor_reports_the_local_model(prepared: Prepared) -> None:
    done = subprocess.run(
        [*command(), "doctor"],
        capture_output=True,
        text=True,
        env=clean_env(
            PRESSLOOP_DATA_DIR=str(prepared.settings.data_dir),
            PRESSLOOP_MODEL_CACHE=str(prepared.settings.model_cache),
            PRESSLOOP_PROVIDER="local",
            COLUMNS="300",
        ),
        timeout=300,
        check=False,
    )
    line = next((x for x in done.stdout.splitlines() if "local model:" in x), "")
    assert line.split()[0] == "ok", done.stdout
    assert "built (llama-cpp-python" in line and "hash ok" in line and "loads in" in line
    assert "model provider: local, model qwen2.5-coder-1.5b-instruct-q4_k_m" in done.stdout
