"""The fake provider servers, for every provider test."""

from tests.wire.fixtures import (  # noqa: F401
    anthropic_server,
    anthropic_server_session,
    openai_server,
    openai_server_session,
)
