"""Fixtures of the security tests: the real app over a real Service (`tests/api/conftest.py`)."""

from tests.api.conftest import make_api  # noqa: F401
