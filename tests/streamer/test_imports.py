"""A stream process loads what writing frames and reading answers needs, not the HTTP app, the
database or the runtime: they were half its memory (120 MiB against 65) and most of its start."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_NEEDED = ("fastapi", "sqlalchemy", "asyncpg", "pressloop.api.app", "pressloop.runtime.service")


def test_a_stream_process_imports_none_of_the_app() -> None:
    probe = (
        "import json, sys; import pressloop.streamer.process; "
        f"print(json.dumps([m for m in {list(NOT_NEEDED)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == []


def test_the_package_still_gives_the_app_when_asked() -> None:
    import pressloop.api
    from pressloop.api.app import create_app

    assert pressloop.api.create_app is create_app
