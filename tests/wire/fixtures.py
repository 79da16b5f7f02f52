"""pytest fixtures for the fake providers. Import them into a conftest.py to use them:

    from tests.wire.fixtures import anthropic_server, openai_server  # noqa: F401

Each server starts once per session; the per-test fixture clears its script and recorded
requests, and at teardown fails the test if a scripted answer was never used or something
unexpected reached the server (a request beyond the script, a protocol violation).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.wire.anthropic_server import FakeAnthropicServer
from tests.wire.openai_server import FakeOpenAIServer


@pytest.fixture(scope="session")
def openai_server_session() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="session")
def anthropic_server_session() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as server:
        yield server


@pytest.fixture
def openai_server(openai_server_session: FakeOpenAIServer) -> Iterator[FakeOpenAIServer]:
    openai_server_session.reset()
    yield openai_server_session
    openai_server_session.verify()


@pytest.fixture
def anthropic_server(
    anthropic_server_session: FakeAnthropicServer,
) -> Iterator[FakeAnthropicServer]:
    anthropic_server_session.reset()
    yield anthropic_server_session
    anthropic_server_session.verify()
