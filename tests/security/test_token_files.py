"""Tokens from the terminal (`pressloop token create|list|revoke`), the first admin token of
`pressloop serve` (only in its 0600 file, never in the output) and the data directory's modes."""

from __future__ import annotations

import hashlib
import re
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from tests.cli.conftest import Pressloop, cli_env, pressloop
from tests.support.serve import Serve

__all__ = ["cli_env", "pressloop"]  # the CLI's fixtures, used below

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def assert_private(data: Path) -> None:
    """The data directory 0700; the database (and its -wal and -shm files) 0600."""
    assert mode(data) == 0o700
    files = [data / "pressloop.db", *data.glob("pressloop.db-*")]
    assert {f.name for f in files} >= {"pressloop.db"}
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}


@asynccontextmanager
async def api_over(data: Path) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP API in this process, over the command's own SQLite database."""
    settings = Settings(data_dir=data, provider="scripted")
    service = await Service.open(settings, provider=lambda: ScriptedProvider([]))
    transport = httpx.ASGITransport(app=create_app(service))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://pressloop.test") as c:
            yield c
    finally:
        await service.close()


def row_of(table: str, token_id: str) -> str:
    return next(line for line in table.splitlines() if token_id in line)


async def test_tokens_from_the_terminal_expire_show_their_last_use_and_revoke(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    created = await pressloop(
        "token", "create", "--role", "viewer", "--name", "ci", "--expires-in", "12h"
    )
    assert created.code == 0, created.err
    token = created.out.strip()
    token_id = re.search(r"\((tok_\w+), expires ", created.err)
    assert token.startswith("plt_") and token_id is not None, created.err
    token_id_text = token_id.group(1)
    bad = await pressloop("token", "create", "--role", "viewer", "--expires-in", "soon")
    assert bad.code == 2 and "is not a duration" in bad.err
    assert_private(data)

    before = await pressloop("token", "list")
    assert before.code == 0, before.err
    row = row_of(before.out, token_id_text)
    assert "ci" in row and "viewer" in row and "active" in row
    assert len(re.findall(STAMP, row)) == 2 and "never" in row  # created, expires; never used

    async with api_over(data) as client:
        used = await client.get("/v1/runs", headers={"Authorization": f"Bearer {token}"})
        assert used.status_code == 200, used.text
    after = await pressloop("token", "list")
    row = row_of(after.out, token_id_text)
    assert len(re.findall(STAMP, row)) == 3 and "never" not in row  # ... and last used
    # Neither the token nor its hash is ever shown.
    for secret in (token, hashlib.sha256(token.encode()).hexdigest()):
        assert secret not in before.out + after.out + after.err

    revoked = await pressloop("token", "revoke", token_id_text)
    assert revoked.code == 0 and f"token {token_id_text} (ci) revoked" in revoked.out
    assert "revoked" in row_of((await pressloop("token", "list")).out, token_id_text)
    async with api_over(data) as client:
        refused = await client.get("/v1/runs", headers={"Authorization": f"Bearer {token}"})
        assert refused.status_code == 401
    unknown = await pressloop("token", "revoke", "tok_nope")
    assert unknown.code == 2 and "does not exist" in unknown.err


async def test_an_existing_database_file_is_made_private(
    pressloop: Pressloop, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    assert (await pressloop("db", "upgrade")).code == 0
    (data / "pressloop.db").chmod(0o644)
    assert (await pressloop("db", "upgrade")).code == 0
    assert_private(data)


async def test_serve_writes_the_first_admin_token_only_to_its_private_file(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    async with Serve(tmp_path, cli_env, "--no-local-wordpress") as server:
        saved = tmp_path / "data" / "admin-token"
        assert f"saved to {saved} (mode 0600" in server.output(), server.output()
        token = saved.read_text(encoding="utf-8").strip()
        assert token.startswith("plt_") and mode(saved) == 0o600
        assert_private(tmp_path / "data")
        async with server.client() as client:
            tokens = await client.get("/v1/tokens")
            assert tokens.status_code == 200 and tokens.json()[0]["name"] == "admin"
    assert server.stop() == 0, server.output()
    assert token not in server.output()
