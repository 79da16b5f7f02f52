"""The fake provider servers, for every provider test, and each adapter on its server."""

from tests.providers.anthropic_calls import anthropic_provider  # noqa: F401
from tests.providers.openai_calls import openai_provider  # noqa: F401
from tests.wire.fixtures import (  # noqa: F401
    anthropic_server,
    anthropic_server_session,
    openai_server,
    openai_server_session,
)
