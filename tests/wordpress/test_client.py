"""The WordPress REST client against the real local WordPress.

Answers WordPress never gives on its own (500, garbage, silence) come from `EdgeServer`, a tiny
HTTP server in front of the real site: it answers as scripted, then forwards to WordPress.
"""

from __future__ import annotations

import asyncio
import struct
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from pressloop.actions.wordpress import WordPressClient
from pressloop.config import Settings
from pressloop.errors import ActionError, ConfigurationError
from pressloop.local_wordpress import LocalSite


@dataclass(kw_only=True)
class Scripted:
    status: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    hang: bool = False  # never answer: wait for the client to give up


@dataclass(kw_only=True)
class EdgeServer:
    """Answers the next scripted answers, then forwards each request to `upstream`."""

    upstream: str
    script: list[Scripted] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    url: str = ""
    handlers: set[asyncio.Task[None]] = field(default_factory=set)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self._answer(reader, writer)
        finally:
            writer.close()
            self.handlers.discard(task)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        method, target, _ = head.split("\r\n", 1)[0].split(" ", 2)
        headers = {
            name.lower(): value
            for name, value in (line.split(": ", 1) for line in head.split("\r\n")[1:] if line)
        }
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        self.requests.append(f"{method} {target}")
        if self.script:
            answer = self.script.pop(0)
            if answer.hang:
                await reader.read()  # until the client gives up and closes the connection
                return
            status, kind, content = answer.status, answer.content_type, answer.body
        else:
            forward = {k: v for k, v in headers.items() if k not in ("host", "connection")}
            async with httpx.AsyncClient() as client:
                upstream = await client.request(
                    method, self.upstream + target, headers=forward, content=body
                )
            status, kind = upstream.status_code, upstream.headers.get("content-type", "")
            content = upstream.content
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: {kind}\r\nContent-Length: {len(content)}\r\n"
            "Connection: close\r\n\r\n".encode()
            + content
        )
        await writer.drain()

    async def close(self) -> None:
        """Wait for the connections still open (a client that gave up may not be seen yet)."""
        if self.handlers:
            await asyncio.wait(self.handlers, timeout=5)


@dataclass(kw_only=True)
class Edge:
    server: EdgeServer
    client: WordPressClient  # a client for the edge server, with a recording sleep
    sleeps: list[float]


@asynccontextmanager
async def edge(site: LocalSite, *script: Scripted, **options: Any) -> AsyncIterator[Edge]:
    """An `EdgeServer` in front of `site` and a client for it (2 retries, unless told)."""
    server = EdgeServer(upstream=site.url, script=list(script))
    listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    server.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}"
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    options = {"timeout_s": 5.0, "max_retries": 2, "retry_base_s": 0.5, **options}
    client = WordPressClient(server.url, site.admin_user, site.app_password, sleep=sleep, **options)
    async with listening:
        try:
            yield Edge(server=server, client=client, sleeps=sleeps)
        finally:
            await client.aclose()
            await server.close()


def tiny_png() -> bytes:
    """A 1x1 red PNG, made here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


# -- the real WordPress ---------------------------------------------------------------------------


async def test_create_read_update_delete_a_post(wordpress_client: WordPressClient) -> None:
    content = "<!-- wp:paragraph -->\n<p>Hello from Pressloop.</p>\n<!-- /wp:paragraph -->"
    created = await wordpress_client.post(
        "/wp/v2/posts", {"title": "First", "content": content, "status": "draft"}
    )
    post_id = created["id"]

    read = await wordpress_client.get(f"/wp/v2/posts/{post_id}")
    assert (read["title"]["raw"], read["content"]["raw"], read["status"]) == (
        "First",
        content,
        "draft",
    )

    await wordpress_client.put(f"/wp/v2/posts/{post_id}", {"title": "Second", "status": "publish"})
    read = await wordpress_client.get(f"/wp/v2/posts/{post_id}")
    assert (read["title"]["raw"], read["status"]) == ("Second", "publish")

    listed = await wordpress_client.request("GET", "/wp/v2/posts", params={"search": "Second"})
    assert [post["id"] for post in listed.data] == [post_id]
    assert listed.total == 1
    both = await wordpress_client.get(
        "/wp/v2/posts", {"include": [post_id, 1], "orderby": "include"}, context=""
    )
    assert [post["id"] for post in both] == [post_id, 1]

    trashed = await wordpress_client.delete(f"/wp/v2/posts/{post_id}")
    assert trashed["status"] == "trash"
    deleted = await wordpress_client.delete(f"/wp/v2/posts/{post_id}", {"force": True})
    assert deleted["deleted"] is True
    with pytest.raises(ActionError, match="404 rest_post_invalid_id"):
        await wordpress_client.get(f"/wp/v2/posts/{post_id}")


async def test_a_missing_post_is_a_clear_error(wordpress_client: WordPressClient) -> None:
    with pytest.raises(ActionError) as caught:
        await wordpress_client.get("/wp/v2/posts/999999")
    assert caught.value.message == (
        "WordPress answered 404 rest_post_invalid_id: Invalid post ID. (GET /wp/v2/posts/999999)"
    )
    assert caught.value.retryable is False


async def test_invalid_params_are_named(wordpress_client: WordPressClient) -> None:
    with pytest.raises(ActionError) as caught:
        await wordpress_client.post("/wp/v2/posts", {"title": "x", "status": "sideways"})
    assert "400 rest_invalid_param" in caught.value.message
    assert "status: status is not one of" in caught.value.message


async def test_a_wrong_app_password_names_the_settings(wordpress: LocalSite) -> None:
    async with WordPressClient(wordpress.url, wordpress.admin_user, "abcd efgh ijkl") as client:
        with pytest.raises(ActionError) as caught:
            await client.get("/wp/v2/users/me")
    assert "WordPress answered 401" in caught.value.message
    assert "PRESSLOOP_WP_APP_PASSWORD" in caught.value.message
    assert caught.value.retryable is False


async def test_a_user_without_the_role_gets_a_clear_403(wordpress: LocalSite) -> None:
    password = wordpress.run_php(
        "$id = wp_create_user('reader', 'secret-reader', 'reader@example.com');"
        "echo WP_Application_Passwords::create_new_application_password($id, ['name' => 't'])[0];"
    )
    async with WordPressClient(wordpress.url, "reader", password) as client:
        assert (await client.get("/wp/v2/users/me", context=""))["name"] == "reader"
        with pytest.raises(ActionError) as caught:
            await client.post("/wp/v2/posts", {"title": "Not mine to write"})
    assert "403 rest_cannot_create" in caught.value.message
    assert "'reader' (PRESSLOOP_WP_USER) lacks the permission" in caught.value.message


async def test_upload_media_from_bytes(wordpress_client: WordPressClient) -> None:
    png = tiny_png()
    media = await wordpress_client.upload_media(
        png, "red dot.png", fields={"title": "Red dot", "alt_text": "A red dot"}
    )
    read = await wordpress_client.get(f"/wp/v2/media/{media['id']}")
    assert (read["mime_type"], read["title"]["raw"], read["alt_text"]) == (
        "image/png",
        "Red dot",
        "A red dot",
    )
    assert (read["media_details"]["width"], read["media_details"]["height"]) == (1, 1)
    async with httpx.AsyncClient() as plain:
        assert (await plain.get(read["source_url"])).content == png


def test_settings_must_name_the_site() -> None:
    with pytest.raises(ConfigurationError, match="PRESSLOOP_WP_URL, PRESSLOOP_WP_APP_PASSWORD"):
        WordPressClient.from_settings(
            Settings(_env_file=None, wp_url=None, wp_user="admin", wp_app_password=None)
        )


# -- answers from the edge: errors, garbage, silence ---------------------------------------------


async def test_a_500_then_a_good_answer_is_retried(wordpress: LocalSite) -> None:
    failure = Scripted(status=500, body=b'{"code":"oops","message":"Try again."}')
    async with edge(wordpress, failure, failure) as site:
        post = await site.client.get("/wp/v2/posts/1")
    assert post["title"]["raw"] == "Hello world!"
    assert len(site.server.requests) == 3
    assert len(site.sleeps) == 2
    assert 0 <= site.sleeps[0] <= 0.5 and 0 <= site.sleeps[1] <= 1.0


async def test_a_500_that_lasts_gives_up_with_the_page_it_saw(wordpress: LocalSite) -> None:
    page = Scripted(
        status=500, body=b"<html><h1>Internal  Server Error</h1></html>", content_type="text/html"
    )
    async with edge(wordpress, page, page, page) as site:
        with pytest.raises(ActionError) as caught:
            await site.client.get("/wp/v2/posts/1")
    assert caught.value.message == (
        "WordPress answered 500 with a body that is not a WordPress error: 'Internal Server "
        "Error' (GET /wp/v2/posts/1) (gave up after 3 attempts)"
    )
    assert caught.value.retryable is True
    assert len(site.sleeps) == 2


async def test_a_post_is_not_repeated_after_a_500_but_is_after_a_503(wordpress: LocalSite) -> None:
    async with edge(wordpress, Scripted(status=500), Scripted(status=503)) as site:
        with pytest.raises(ActionError, match="500 with an empty body"):
            await site.client.post("/wp/v2/posts", {"title": "Maybe created"})
        created = await site.client.post("/wp/v2/posts", {"title": "Created once"})
    assert created["title"]["raw"] == "Created once"
    assert [request.split(" ")[0] for request in site.server.requests] == ["POST"] * 3
    assert len(site.sleeps) == 1


async def test_a_garbage_body_is_a_clear_error(wordpress: LocalSite) -> None:
    async with edge(wordpress, Scripted(body=b"\x00\x01 not json {")) as site:
        with pytest.raises(ActionError) as caught:
            await site.client.get("/wp/v2/posts/1")
    assert caught.value.message.startswith(
        "WordPress answered 200 with a body that is not JSON (GET /wp/v2/posts/1)"
    )
    assert caught.value.retryable is False
    assert site.sleeps == []


async def test_a_silent_site_times_out_and_is_retried(wordpress: LocalSite) -> None:
    hang = Scripted(hang=True)
    async with edge(wordpress, hang, hang, hang, timeout_s=0.2, max_retries=1) as site:
        with pytest.raises(ActionError) as caught:
            await site.client.get("/wp/v2/posts/1")
        assert "did not answer within 0.2 s (GET /wp/v2/posts/1)" in caught.value.message
        assert caught.value.retryable is True
        assert len(site.sleeps) == 1
        # A POST that timed out may have been done: it is not sent again.
        with pytest.raises(ActionError, match="did not answer"):
            await site.client.post("/wp/v2/posts", {"title": "Maybe created"})
    assert len(site.server.requests) == 3


async def test_an_unreachable_site_is_a_retryable_error(wordpress: LocalSite) -> None:
    async with edge(wordpress) as site:
        url = site.server.url
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async with WordPressClient(url, "admin", "password", sleep=sleep, max_retries=2) as client:
        with pytest.raises(ActionError) as caught:
            await client.post("/wp/v2/posts", {"title": "Never sent"})
    assert caught.value.message.startswith(f"could not reach WordPress at {url}")
    assert caught.value.retryable is True
    assert len(sleeps) == 2  # the connection was never made: even a POST is retried
