"""Threads, health, the OpenAPI schema, the action catalog, usage and tokens."""

from __future__ import annotations

from pathlib import Path

import httpx

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.db import Database
from tests.api.conftest import ApiFactory

ROUTES = {
    ("GET", "/healthz"),
    ("POST", "/v1/threads"),
    ("GET", "/v1/threads"),
    ("GET", "/v1/threads/{thread_id}"),
    ("POST", "/v1/threads/{thread_id}/runs"),
    ("GET", "/v1/runs"),
    ("GET", "/v1/runs/{run_id}"),
    ("GET", "/v1/runs/{run_id}/events"),
    ("POST", "/v1/runs/{run_id}/cancel"),
    ("POST", "/v1/runs/{run_id}/requeue"),
    ("GET", "/v1/actions"),
    ("GET", "/v1/usage"),
    ("POST", "/v1/tokens"),
    ("GET", "/v1/tokens"),
}


def unreachable_service(tmp_path: Path) -> Service:
    """A service whose PostgreSQL refuses connections (nothing listens on port 1)."""
    settings = Settings(data_dir=tmp_path, provider="scripted")
    database = Database.open("postgresql://nobody@127.0.0.1:1/none")
    provider = ScriptedProvider([])
    return Service(settings=settings, database=database, provider=lambda: provider)


async def test_openapi_lists_every_route_and_bearer_auth(tmp_path: Path) -> None:
    service = unreachable_service(tmp_path)
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        schema = (await client.get("/openapi.json")).json()
    await service.close()
    listed = {(m.upper(), path) for path, item in schema["paths"].items() for m in item}
    assert ROUTES.issubset(listed)
    post_run = schema["paths"]["/v1/threads/{thread_id}/runs"]["post"]
    assert {"200", "202"} <= set(post_run["responses"])
    assert "RunCreate" in schema["components"]["schemas"]
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


async def test_healthz_is_503_when_the_database_is_unreachable(tmp_path: Path) -> None:
    service = unreachable_service(tmp_path)
    transport = httpx.ASGITransport(app=create_app(service))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.get("/healthz")
    await service.close()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "database_unavailable"


async def test_healthz_is_open_and_checks_the_database(make_api: ApiFactory) -> None:
    api = await make_api()
    response = await api.client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "ok"}


async def test_threads_are_created_listed_and_shown(make_api: ApiFactory) -> None:
    api = await make_api()
    created = await api.client.post(
        "/v1/threads", json={"title": "Colours", "metadata": {"site": "a"}}, headers=api.auth()
    )
    assert created.status_code == 201
    thread = created.json()
    assert thread["title"] == "Colours" and thread["metadata"] == {"site": "a"}
    assert thread["created_by"] == "operator-user" and thread["parent_id"] is None
    assert thread["created_at"] == "2026-01-05T12:00:00Z"

    listed = (await api.client.get("/v1/threads", headers=api.auth("viewer"))).json()
    assert [t["id"] for t in listed] == [thread["id"]]
    shown = (await api.client.get(f"/v1/threads/{thread['id']}", headers=api.auth())).json()
    assert shown == {"thread": thread, "messages": [], "runs": [], "children": []}
    too_long = await api.client.post("/v1/threads", json={"title": "x" * 201}, headers=api.auth())
    assert too_long.status_code == 422


async def test_only_admins_set_a_thread_policy_and_it_must_be_valid(make_api: ApiFactory) -> None:
    api = await make_api()
    loosen = {"metadata": {"policy": {"destructive": "allow"}}}
    operator = await api.client.post("/v1/threads", json=loosen, headers=api.auth())
    assert operator.status_code == 403
    admin = await api.client.post("/v1/threads", json=loosen, headers=api.auth("admin"))
    assert admin.status_code == 201
    broken = {"metadata": {"policy": {"max_rounds": "lots"}}}
    invalid = await api.client.post("/v1/threads", json=broken, headers=api.auth("admin"))
    assert invalid.status_code == 422
    assert "metadata.policy" in invalid.json()["error"]["message"]


async def test_actions_catalog_and_usage(make_api: ApiFactory) -> None:
    api = await make_api()
    viewer = api.auth("viewer")
    catalog = (await api.client.get("/v1/actions", headers=viewer)).json()
    by_name = {entry["name"]: entry for entry in catalog}
    assert {"remember", "recall", "forget"} <= set(by_name)
    assert by_name["remember"]["risk"] == "write"
    assert "content" in by_name["remember"]["params_schema"]["properties"]

    assert (await api.client.get("/v1/usage", headers=viewer)).json() == []
    thread_id = await api.thread()
    await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "remember teal"}, headers=api.auth()
    )
    rows = (await api.client.get("/v1/usage?days=1&scope=user", headers=viewer)).json()
    assert len(rows) == 1
    row = rows[0]
    assert row["day"] == "2026-01-05" and row["subject"] == "operator-user"
    assert row["model_calls"] == 2 and row["action_calls"] == 1 and row["runs"] == 1
    assert row["input_tokens"] > 0
    both = (await api.client.get("/v1/usage?days=7", headers=viewer)).json()
    assert {r["scope"] for r in both} == {"user", "site"}
    assert (await api.client.get("/v1/usage?days=0", headers=viewer)).status_code == 422


async def test_admins_create_tokens_shown_once(make_api: ApiFactory) -> None:
    api = await make_api()
    created = await api.client.post(
        "/v1/tokens", json={"name": "dashboard", "role": "viewer"}, headers=api.auth("admin")
    )
    assert created.status_code == 201
    token = created.json()
    assert token["token"].startswith("plt_") and token["role"] == "viewer"

    mine = {"Authorization": f"Bearer {token['token']}"}
    assert (await api.client.get("/v1/runs", headers=mine)).status_code == 200
    assert (await api.client.post("/v1/threads", json={}, headers=mine)).status_code == 403

    listed = (await api.client.get("/v1/tokens", headers=api.auth("admin"))).json()
    assert "dashboard" in {t["name"] for t in listed}
    assert all("token" not in t for t in listed)
    bad_role = await api.client.post(
        "/v1/tokens", json={"name": "x", "role": "root"}, headers=api.auth("admin")
    )
    assert bad_role.status_code == 422
