"""Issue 13, point 8: a password given to `create_user` is never stored, shown or logged.

Through the real HTTP app over a real Service (SQLite file, real WordPress, scripted model): the
password reaches WordPress (the new user can sign in with it) and nothing else: not a byte of the
database files, not the API's runs, events, ledger, threads or approvals, not the admin UI's
pages, not the logs. A step that would have to wait for approval with a password is refused
(the model calls again without it), an approval cannot be given one, and a run resumed from
storage never sends the redaction mark as a password.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
import sqlalchemy as sa

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.contracts import Checkpoint, RunStatus, StepStatus
from pressloop.local_wordpress.local_site import LocalSite
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.schema import action_ledger, runs
from pressloop.ui import mount_ui
from tests.api.conftest import Api, Gate
from tests.wordpress.conftest import (  # noqa: F401 (the WordPress fixtures)
    wordpress,
    wordpress_client,
    wordpress_packages,
    wordpress_session,
)

PASSWORD = "Hunter2-never-stored-7Qz"


def create_user(**extra: Any) -> dict[str, Any]:
    return {"username": "helper", "email": "helper@example.test", "role": "author", **extra}


def tool_call(name: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": params}]}


def json_decision(name: str, params: dict[str, Any]) -> dict[str, Any]:
    decision = {"thought": "", "actions": [{"action": name, "params": params}], "reply": ""}
    return {"text": json.dumps(decision)}


@dataclass(kw_only=True)
class Site:
    api: Api
    data_dir: Path
    wp: WordPressClient
    local: LocalSite

    @property
    def service(self) -> Service:
        return self.api.service

    async def run(self, message: str) -> dict[str, Any]:
        thread = await self.api.thread()
        answer = await self.api.client.post(
            f"/v1/threads/{thread}/runs",
            json={"message": message, "mode": "wait"},
            headers=self.api.auth(),
        )
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    async def every_answer(self, run: dict[str, Any], session: str) -> dict[str, str]:
        """What a viewer can read of the run over the API, and an admin in the UI."""
        run_id, thread_id = run["run"]["id"], run["run"]["thread_id"]
        viewer = self.api.auth("viewer")
        texts = {}
        for path in (
            f"/v1/runs/{run_id}",
            f"/v1/runs/{run_id}/events",
            f"/v1/runs/{run_id}/ledger",
            f"/v1/threads/{thread_id}",
            "/v1/runs",
            "/v1/approvals",
        ):
            answer = await self.api.client.get(path, headers=viewer)
            assert answer.status_code == 200, (path, answer.text)
            texts[path] = answer.text
        for path in (f"/ui/runs/{run_id}", f"/ui/threads/{thread_id}", "/ui/approvals"):
            answer = await self.api.client.get(path, headers=ui_cookie(session))
            assert answer.status_code == 200, (path, answer.text[:300])
            texts[path] = answer.text
        return texts

    def database_bytes(self) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(self.data_dir.glob("pressloop.db*")))

    async def can_sign_in(self, login: str, password: str) -> bool:
        async with httpx.AsyncClient(
            base_url=self.local.url,
            trust_env=False,
            cookies={"wordpress_test_cookie": "WP Cookie check"},
        ) as web:
            answer = await web.post(
                "/wp-login.php", data={"log": login, "pwd": password, "testcookie": "1"}
            )
        return any(c.startswith("wordpress_logged_in") for c in answer.cookies)


@pytest.fixture
async def make_site(
    wordpress: LocalSite,  # noqa: F811
    wordpress_client: WordPressClient,  # noqa: F811
    tmp_path: Path,
) -> AsyncIterator[Any]:
    cleanups: list[Any] = []

    async def build(script: list[dict[str, Any]], **overrides: Any) -> Site:
        env = wordpress.settings_env()
        settings = Settings(
            data_dir=tmp_path,
            provider="scripted",
            wp_url=env["PRESSLOOP_WP_URL"],
            wp_user=env["PRESSLOOP_WP_USER"],
            wp_app_password=env["PRESSLOOP_WP_APP_PASSWORD"],
            **overrides,
        )
        scripted = ScriptedProvider(script)
        service = await Service.open(settings, provider=lambda: scripted)
        cleanups.append(service.close)
        tokens = {}
        for role in ("admin", "operator", "viewer"):
            _record, tokens[role] = await service.create_token(name=f"{role}-user", role=role)
        app = mount_ui(create_app(service))  # the UI's pages show what must stay secret
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://pressloop.test"
        )
        cleanups.append(client.aclose)
        api = Api(service=service, app=app, client=client, scripted=scripted, gate=Gate())
        api.tokens.update(tokens)
        return Site(api=api, data_dir=tmp_path, wp=wordpress_client, local=wordpress)

    yield build
    for cleanup in reversed(cleanups):
        await cleanup()


async def sign_in(api: Api, token: str) -> str:
    """Sign in to the admin UI with `token`; the session cookie's value."""
    answer = await api.client.post(
        "/ui/login",
        content=urlencode({"token": token, "next": "/ui/chat"}),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert answer.status_code == 303, answer.text
    api.client.cookies.clear()  # each request says itself whether it carries the session
    name, _, value = answer.headers["set-cookie"].split(";")[0].partition("=")
    assert value, answer.headers
    return f"{name}={value}"


def ui_cookie(session: str) -> dict[str, str]:
    return {"Cookie": session}


def assert_nowhere(site: Site, texts: dict[str, str], logs: str) -> None:
    for where, text in texts.items():
        assert PASSWORD not in text, f"the password is in {where}"
    assert PASSWORD not in logs, "the password is in the logs"
    assert PASSWORD.encode() not in site.database_bytes(), "the password is in the database"


@pytest.mark.parametrize("protocol", ["tools", "json"])
async def test_a_password_reaches_wordpress_and_nothing_else(
    make_site: Any, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    answer = tool_call if protocol == "tools" else json_decision
    final = {"text": "Created."} if protocol == "tools" else json_decision_reply("Created.")
    site: Site = await make_site(
        [answer("create_user", create_user(password=PASSWORD)), final],
        decision_protocol=protocol,
    )
    run = await site.run("Create an author account called helper.")
    assert run["run"]["status"] == "succeeded", run
    (step,) = run["result"]["steps"]
    assert step["status"] == "succeeded" and step["params"]["password"] == "[secret]"
    assert await site.can_sign_in("helper", PASSWORD)  # WordPress got the real one
    session = await sign_in(site.api, site.api.tokens["admin"])
    texts = await site.every_answer(run, session)
    assert "[secret]" in texts[f"/v1/runs/{run['run']['id']}/ledger"]
    await site.service.database.close()  # every page written to the file
    assert_nowhere(site, texts, caplog.text)


def json_decision_reply(text: str) -> dict[str, Any]:
    return {"text": json.dumps({"thought": "", "actions": [], "reply": text})}


async def test_a_password_is_never_parked_in_an_approval(
    make_site: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """In a tainted turn create_user needs a person: with a password it is refused (it would
    wait in storage), the model asks again without one, and an approver cannot add one."""
    caplog.set_level(logging.DEBUG)
    site: Site = await make_site(
        [
            tool_call("get_post", {"id": 1}),
            tool_call("create_user", create_user(password=PASSWORD)),
            tool_call("create_user", create_user()),
            {"text": "Created helper; they can reset their password from the login page."},
        ]
    )
    run = await site.run("Read post 1, then create the helper account.")
    assert run["run"]["status"] == "waiting_approval", run
    refused, parked = run["result"]["steps"][1:]
    assert refused["status"] == "denied" and "never stores `password`" in refused["result_summary"]
    assert parked["status"] == "pending_approval"
    (approval,) = (await site.api.client.get("/v1/approvals", headers=site.api.auth())).json()
    assert approval["untrusted"][0]["action"] == "get_post" and "password" not in approval["params"]
    session = await sign_in(site.api, site.api.tokens["admin"])
    page = (await site.api.client.get("/ui/approvals", headers=ui_cookie(session))).text
    assert "Untrusted content was in front of the agent" in page and "get_post" in page

    edited = await site.api.client.post(
        f"/v1/approvals/{approval['id']}/approve",
        json={"params": create_user(password=PASSWORD)},
        headers=site.api.auth(),
    )
    assert edited.status_code == 422 and "never stores secrets" in edited.text
    approved = await site.api.client.post(
        f"/v1/approvals/{approval['id']}/approve", json={}, headers=site.api.auth()
    )
    assert approved.status_code == 200, approved.text
    done = await site.service.run_now(run["run"]["id"]) or await site.service.wait(
        run["run"]["id"], timeout_s=20
    )
    assert done.status is RunStatus.SUCCEEDED, done.result
    assert not await site.can_sign_in("helper", PASSWORD)
    users = await site.wp.get("/wp/v2/users", {"search": "helper", "context": "edit"})
    assert [u["username"] for u in users] == ["helper"]
    texts = await site.every_answer(run, session)
    await site.service.database.close()
    assert_nowhere(site, texts, caplog.text)


async def test_a_resumed_run_never_sends_the_mark_as_a_password(make_site: Any) -> None:
    """A worker died after the model's answer was checkpointed (its password only a mark) and
    before the step ran: the resumed step fails and says why; WordPress is not asked."""
    site: Site = await make_site(
        [
            tool_call("create_user", create_user(password=PASSWORD)),
            {"text": "Created."},
            {"text": "It did not run; please give the password again."},
        ]
    )
    run = await site.run("Create the helper account.")
    run_id = run["run"]["id"]
    created = await site.wp.get("/wp/v2/users", {"search": "helper", "context": "edit"})
    await site.wp.delete(f"/wp/v2/users/{created[0]['id']}", {"force": True, "reassign": 1})
    record = await site.service.get_run(run_id)
    assert record.checkpoint is not None
    async with site.service.database.write() as conn:  # as the crash would have left it
        await conn.execute(sa.delete(action_ledger).where(action_ledger.c.run_id == run_id))
        before = Checkpoint(round=1, messages=record.checkpoint.messages[:2])
        await conn.execute(
            sa.update(runs)
            .where(runs.c.id == run_id)
            .values(status="queued", checkpoint=before.model_dump(mode="json"))
        )
    resumed = await site.service.run_now(run_id)
    assert resumed is not None and resumed.result is not None
    step = resumed.result.steps[0]
    assert step.status is StepStatus.FAILED and "was not kept" in step.result_summary
    assert await site.wp.get("/wp/v2/users", {"search": "helper"}) == []
    assert not await site.can_sign_in("helper", "[secret]")
