"""Fixtures of the MCP client tests: a whole Service (`make_service`, from tests/runtime) for the
tests that use outside servers in real turns; `database_url`, `database` and `clock` come from
tests/conftest.py."""

from __future__ import annotations

from tests.runtime.conftest import make_service

__all__ = ["make_service"]
