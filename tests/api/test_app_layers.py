"""The UI sits on top of the API: the API imports nothing of it, and only `mount_ui` puts the
pages on an app (what `pressloop serve` and the tests that reach the UI do)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx

from pressloop.api import create_app
from pressloop.ui import mount_ui
from tests.api.test_meta import unreachable_service


def test_the_api_imports_nothing_of_the_ui() -> None:
    check = (
        "import sys, pressloop.api; "
        "print(sorted(m for m in sys.modules if m.startswith('pressloop.ui')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, check=True
    ).stdout
    assert found.strip() == "[]"


async def test_the_ui_is_on_the_app_only_once_mounted(tmp_path: Path) -> None:
    service = unreachable_service(tmp_path)  # the sign-in form reads nothing
    answers = []
    for app in (create_app(service), mount_ui(create_app(service))):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            answers.append((await client.get("/ui/login")).status_code)
    await service.close()
    assert answers == [404, 200]
