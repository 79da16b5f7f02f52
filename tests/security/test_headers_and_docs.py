"""Security headers on every response; no page loads anything from another origin or runs
inline script; `/docs` is Swagger UI served from this machine (and can be turned off)."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from pressloop.api import create_app
from pressloop.config import Settings
from pressloop.providers.scripted import ScriptedProvider
from pressloop.runtime.service import Service
from pressloop.store.db import Database
from tests.api.conftest import Api, ApiFactory
from tests.security.access_helpers import sign_in, ui_cookie

EXPECTED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}
# The URLs a page loads or sends to: attributes and CSS url(...).
LINKS = re.compile(r"""\b(?:src|href|action|formaction|poster|srcset)\s*=\s*["']([^"']*)["']""")
CSS_URLS = re.compile(r"""url\(\s*["']?([^"')]*)""")
ABSOLUTE = re.compile(r"""(?<!xmlns=["'])\bhttps?://[^\s"'<>)]+""")
INLINE_SCRIPT = re.compile(r"<script\b(?![^>]*\bsrc=)[^>]*>", re.IGNORECASE)
INLINE_HANDLER = re.compile(r"""<[^>]*\son[a-z]+\s*=""", re.IGNORECASE)
INLINE_STYLE = re.compile(r"""<style\b|<[^>]*\sstyle\s*=""", re.IGNORECASE)
STATIC = Path(__file__).resolve().parents[2] / "pressloop" / "ui" / "static"
UI_ASSETS = sorted(STATIC.glob("*.js")) + sorted(STATIC.glob("*.css"))


def assert_secure_headers(response: httpx.Response) -> None:
    where = f"{response.request.method} {response.request.url.path} ({response.status_code})"
    for name, value in EXPECTED.items():
        assert response.headers.get(name) == value, (where, name, response.headers)
    policy = response.headers.get("content-security-policy", "")
    directives = {d.split()[0]: d.split()[1:] for d in policy.split("; ") if d}
    assert directives.get("frame-ancestors") == ["'none'"], (where, policy)
    assert directives.get("script-src") == ["'self'"], (where, policy)
    assert directives.get("style-src") == ["'self'"], (where, policy)
    assert directives.get("default-src") == ["'self'"], (where, policy)


def foreign(urls: list[str], host: str) -> list[str]:
    """URLs that point at another origin (protocol-relative or absolute to another host)."""
    bad = []
    for url in urls:
        parts = urlsplit(url.strip())
        if parts.scheme in {"data", ""} and not url.strip().startswith("//"):
            continue
        if parts.scheme in {"http", "https"} and parts.netloc == host:
            continue
        bad.append(url)
    return bad


def assert_same_origin_page(html: str, host: str, where: str) -> None:
    assert foreign(LINKS.findall(html) + CSS_URLS.findall(html), host) == [], where
    assert foreign(ABSOLUTE.findall(html), host) == [], where
    assert INLINE_SCRIPT.findall(html) == [], where
    assert INLINE_HANDLER.findall(html) == [], where
    assert INLINE_STYLE.findall(html) == [], where


async def some_data(api: Api) -> dict[str, str]:
    """A thread with a finished run and a spawned child: every UI page has something to show."""
    thread_id = await api.thread()
    done = await api.client.post(
        f"/v1/threads/{thread_id}/runs", json={"message": "remember teal"}, headers=api.auth()
    )
    assert done.status_code == 200, done.text
    child = await api.client.post(
        f"/v1/threads/{thread_id}/spawn", json={"message": "look around"}, headers=api.auth()
    )
    assert child.status_code == 201, child.text
    return {"thread_id": thread_id, "run_id": done.json()["run"]["id"]}


async def crawl_ui(api: Api, session: str, start: str = "/ui/chat") -> dict[str, httpx.Response]:
    """Every UI page reachable by links from `start` (the navigation, threads, runs ...)."""
    seen: dict[str, httpx.Response] = {}
    queue = [start]
    while queue and len(seen) < 60:
        path = queue.pop(0)
        if path in seen:
            continue
        answer = await api.client.get(path, headers=ui_cookie(session))
        seen[path] = answer
        for link in LINKS.findall(answer.text):
            target = urlsplit(link)
            if target.scheme or target.netloc or not target.path.startswith("/ui/"):
                continue
            if target.path.startswith("/ui/static/") or target.path == "/ui/logout":
                continue
            queue.append(target.path + (f"?{target.query}" if target.query else ""))
    return seen


async def test_every_ui_page_and_api_answer_carries_the_headers(make_api: ApiFactory) -> None:
    api = await make_api()
    ids = await some_data(api)
    session = await sign_in(api, api.tokens["admin"])
    pages = await crawl_ui(api, session)
    thread_page, run_page = f"/ui/threads/{ids['thread_id']}", f"/ui/runs/{ids['run_id']}"
    assert {"/ui/threads", "/ui/runs", "/ui/settings", thread_page, run_page} <= set(pages)
    for path, answer in pages.items():
        assert answer.status_code == 200, (path, answer.text)
        assert_same_origin_page(answer.text, "pressloop.test", path)
    assert 'class="level-1"' in pages[thread_page].text  # the spawned child, without style=

    answers = list(pages.values())
    answers += [
        await api.client.get("/ui/login"),
        await api.client.get("/ui/chat"),  # 303 to the sign-in page
        await api.client.get("/ui/static/app.js"),
        await api.client.get("/healthz"),
        await api.client.get("/v1/threads", headers=api.auth("viewer")),
        await api.client.get("/v1/threads"),  # 401
        await api.client.get("/v1/threads/thr_missing", headers=api.auth("viewer")),  # 404
        await api.client.post("/v1/threads", json={"title": 5}, headers=api.auth()),  # 422
        await api.client.post("/v1/threads", content=b" " * 10_000_000),  # 413
        await api.client.get(
            f"/v1/runs/{ids['run_id']}/events",
            headers={**api.auth("viewer"), "Accept": "text/event-stream"},
        ),
        await api.client.get("/openapi.json"),
        await api.client.get("/docs"),
        await api.client.get("/docs/assets/swagger-ui.css"),
    ]
    for answer in answers:
        assert_secure_headers(answer)


async def test_the_ui_scripts_and_styles_load_nothing_from_elsewhere(make_api: ApiFactory) -> None:
    api = await make_api()
    for path in UI_ASSETS:
        answer = await api.client.get(f"/ui/static/{path.name}")
        assert answer.status_code == 200
        text = answer.text
        assert re.findall(r"https?://|url\(\s*[\"']?//", text) == [], path.name
        if path.suffix == ".js":
            assert "eval(" not in text and "new Function" not in text, path.name
            assert not re.search(r"""setAttribute\(\s*["']style""", text), path.name


async def test_an_unexpected_error_is_answered_with_the_headers_too(tmp_path: Path) -> None:
    """The headers sit outside the error handling: a 500 carries them as well."""
    settings = Settings(data_dir=tmp_path, provider="scripted")
    database = Database.open("postgresql://nobody@127.0.0.1:1/none")  # nothing listens there
    provider = ScriptedProvider([])
    service = Service(settings=settings, database=database, provider=lambda: provider)
    transport = httpx.ASGITransport(app=create_app(service), raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        answers = [
            await client.get("/healthz"),
            await client.get("/v1/threads", headers={"Authorization": "Bearer plt_x"}),
        ]
    await service.close()
    assert [a.status_code for a in answers] == [503, 500]
    for answer in answers:
        assert_secure_headers(answer)


async def test_docs_are_served_from_this_machine(make_api: ApiFactory) -> None:
    api = await make_api()
    docs = await api.client.get("/docs")
    assert docs.status_code == 200 and docs.headers["content-type"].startswith("text/html")
    assert_same_origin_page(docs.text, "pressloop.test", "/docs")
    loaded = LINKS.findall(docs.text)
    assert {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= set(loaded)
    assert 'data-openapi-url="/openapi.json"' in docs.text
    for url in loaded:
        asset = await api.client.get(url)
        assert asset.status_code == 200, url
        assert asset.headers["content-type"].split(";")[0] in {
            "text/javascript",
            "text/css",
            "image/svg+xml",
        }, url
        assert_secure_headers(asset)
    init = await api.client.get("/docs/swagger-init.js")
    assert "validatorUrl: null" in init.text  # the online validator is another origin
    assert (await api.client.get("/openapi.json")).status_code == 200
    # Only what the page uses; no ReDoc (it needs inline styles and blob: workers).
    assert (await api.client.get("/docs/assets/redoc.standalone.js")).status_code == 404
    assert (await api.client.get("/docs/assets/..%2F__init__.py")).status_code == 404
    assert (await api.client.get("/redoc")).status_code == 404


async def test_docs_can_be_turned_off(make_api: ApiFactory) -> None:
    api = await make_api(api_docs=False)
    for path in ("/docs", "/openapi.json", "/docs/assets/swagger-ui-bundle.js"):
        assert (await api.client.get(path)).status_code == 404, path
    assert (await api.client.get("/healthz")).status_code == 200
