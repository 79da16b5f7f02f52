"""The `pressloop` command, run as a real subprocess against a scripted model and SQLite."""

from __future__ import annotations

import asyncio
import json
import re
import stat
from pathlib import Path

from pressloop.store import migrate
from tests.cli.conftest import Pressloop
from tests.support.processes import pack_env
from tests.support.serve import Serve

THREAD_ID = re.compile(r"thr_[0-9a-f]{28}")


async def test_chat_streams_actions_and_the_answer_then_continues_the_thread(
    pressloop: Pressloop,
) -> None:
    first = await pressloop("chat", "Remember that I like teal")
    assert first.code == 0, first.err
    assert "→ remember" in first.out and "The owner likes teal." in first.out
    assert "✓ remembered #1" in first.out
    assert "Noted: you like teal." in first.out
    assert "succeeded" in first.out and "2 model calls, 1 action" in first.out
    threads = set(THREAD_ID.findall(first.out))
    assert len(threads) == 1
    thread_id = threads.pop()

    second = await pressloop("chat", "--thread", thread_id, "And blue too")
    assert second.code == 0, second.err
    assert "Noted: you like teal." in second.out
    assert set(THREAD_ID.findall(second.out)) == {thread_id}

    runs, shown = await asyncio.gather(
        pressloop("runs", "list", "--thread", thread_id),
        pressloop("threads", "show", thread_id),
    )
    assert runs.code == 0 and shown.code == 0
    assert runs.out.count("succeeded") == 2 and runs.out.count(thread_id) == 2
    assert "Remember that I like teal" in shown.out and "And blue too" in shown.out


async def test_failures_exit_nonzero_with_a_clear_message(pressloop: Pressloop) -> None:
    no_provider, unknown, missing, bad_role = await asyncio.gather(
        pressloop("chat", "hello", drop=("PRESSLOOP_PROVIDER",)),
        pressloop("chat", "--thread", "thr_nope", "hi"),
        pressloop("chat"),
        pressloop("token", "create", "--role", "root"),
    )
    # A run that fails: exit 1, and the configuration message, never a traceback.
    assert no_provider.code == 1
    assert "No model provider is configured" in no_provider.out
    assert "OPENAI_API_KEY" in no_provider.out and "failed" in no_provider.out
    assert "Traceback" not in no_provider.out + no_provider.err
    # Usage errors: exit 2.
    assert unknown.code == 2 and "thread 'thr_nope' does not exist" in unknown.err
    assert missing.code == 2 and "Missing argument" in missing.err
    assert bad_role.code == 2 and "'root' is not one of" in bad_role.err


async def test_db_upgrade_token_create_and_doctor(pressloop: Pressloop, tmp_path: Path) -> None:
    head = migrate.head_revision()
    empty = str(tmp_path / "empty")
    unconfigured, upgraded = await asyncio.gather(
        pressloop("doctor", env={"PRESSLOOP_DATA_DIR": empty}, drop=("PRESSLOOP_PROVIDER",)),
        pressloop("db", "upgrade"),
    )
    assert unconfigured.code == 1
    assert "does not exist yet" in unconfigured.out and "pressloop db upgrade" in unconfigured.out
    assert "No model provider is configured" in unconfigured.out
    assert upgraded.code == 0 and f"database at revision {head} (head)" in upgraded.out

    token, doctor = await asyncio.gather(
        pressloop("token", "create", "--role", "operator", "--name", "ci"),
        pressloop("doctor", env={"PRESSLOOP_DISABLE_AGENT": "1"}),
    )
    assert token.code == 0
    assert re.fullmatch(r"plt_[A-Za-z0-9_-]{40,}\n", token.out), token.out
    assert "operator token 'ci'" in token.err
    assert doctor.code == 0, doctor.out
    assert f"ok  schema: at revision {head}" in doctor.out
    assert "model provider: scripted, model scripted" in doctor.out
    assert "kill switch: ON (PRESSLOOP_DISABLE_AGENT)" in doctor.out
    assert "wordpress: not configured" in doctor.out


def read_secret(path: Path) -> tuple[str, int]:
    return path.read_text().strip(), stat.S_IMODE(path.stat().st_mode)


async def test_serve_makes_an_admin_token_on_first_start_and_serves_the_api(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    async with Serve(tmp_path, cli_env) as server:
        output = server.output()
        # The token is only in its file (0600), the output says where, never the token.
        printed = re.search(r"saved to (\S+admin-token) \(mode 0600", output)
        assert printed is not None, output
        saved = Path(printed.group(1))
        assert saved == tmp_path / "data" / "admin-token"
        token, mode = read_secret(saved)
        assert token == server.admin_token
        assert token.startswith("plt_") and mode == 0o600
        assert token not in output
        assert f"http://127.0.0.1:{server.port}" in output
        # With no PRESSLOOP_WP_URL, serve starts a local WordPress for the agent to act on.
        site = re.search(r"Local WordPress: (http://127\.0\.0\.1:\d+) \(wp-admin: admin / ", output)
        assert site is not None, output

        async with server.client() as client:
            assert (await client.get("/healthz")).json() == {"status": "ok", "database": "ok"}
            thread = (await client.post("/v1/threads", json={"title": "t"})).json()
            answer = await client.post(
                f"/v1/threads/{thread['id']}/runs", json={"message": "remember teal"}
            )
            assert answer.status_code == 200
            assert answer.json()["result"]["assistant_text"] == "Noted: you like teal."
            assert (await client.get("/v1/tokens")).json()[0]["name"] == "admin"
            catalog = {a["name"] for a in (await client.get("/v1/actions")).json()}
            assert {"create_post", "delete_user", "get_site_context"} <= catalog
            wp_index = (await client.get(f"{site.group(1)}/?rest_route=/")).json()
            assert "name" in wp_index
    assert server.stop() == 0, server.output()
    assert "Pressloop stopped." in server.output()


async def test_schedules_from_the_terminal(pressloop: Pressloop) -> None:
    created = await pressloop(
        "schedules",
        "create",
        "--every",
        "900",
        "--timezone",
        "Europe/Paris",
        "--hours",
        "08:00-22:00",
        "--message",
        "Check comments",
    )
    assert created.code == 0, created.err
    assert "every 900 s" in created.out and "08:00-22:00" in created.out
    schedule_id = next(w for w in created.out.split() if w.startswith("sch_"))
    listed = await pressloop("schedules", "list")
    assert schedule_id in listed.out and "active" in listed.out
    paused = await pressloop("schedules", "pause", schedule_id)
    assert paused.code == 0 and "paused" in paused.out
    both = await pressloop("schedules", "create", "--every", "60", "--cron", "* * * * *")
    assert both.code == 2 and "exactly one" in both.err
    bad = await pressloop("schedules", "create", "--cron", "not a cron")
    assert bad.code == 2 and "invalid cron" in bad.err
    gone = await pressloop("schedules", "delete", schedule_id)
    assert gone.code == 0
    again = await pressloop("schedules", "delete", schedule_id)
    assert again.code == 2 and "does not exist" in again.err


async def test_approvals_from_the_terminal(pressloop: Pressloop, tmp_path: Path) -> None:
    script = tmp_path / "delete.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "delete_user", "arguments": {"login": "bob"}}]},
                {"text": "Bob is gone."},
            ]
        )
    )
    effects = tmp_path / "effects.txt"
    env = pack_env("approval_pack", script, effects)
    chat = await pressloop("chat", "delete user bob", env=env)
    assert chat.code == 0, chat.err
    assert "delete_user" in chat.out and "waiting_approval" in chat.out
    assert not effects.exists()
    listed = await pressloop("approvals", "list", "--status", "pending", env=env)
    approval_id = next(w for w in listed.out.split() if w.startswith("apr_"))
    # Each command is a new process, so its scripted model starts its script from the top.
    rest = tmp_path / "rest.json"
    rest.write_text(json.dumps([{"text": "Bob is gone."}]))
    env["PRESSLOOP_SCRIPT"] = str(rest)
    approved = await pressloop("approvals", "approve", approval_id, "--note", "ok", env=env)
    assert approved.code == 0, approved.err
    assert "approved" in approved.out and "succeeded" in approved.out
    assert effects.read_text() == "deleted bob\n"
    again = await pressloop("approvals", "reject", approval_id, env=env)
    assert again.code == 2 and "already approved" in again.err
