"""upload_media from a URL and from bytes, against the real local WordPress.

The files are served by a real HTTP server on loopback (the edge of the system), so fetching
them needs PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE (here `allow_private` in the services' `web`, as
the runtime sets it); without it, the loopback address is refused. Every upload is checked by
reading the media library back over REST and downloading the stored file.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from pressloop.actions.executor import Executor
from pressloop.actions.outbound import FetchOptions
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.wordpress import WordPressClient
from pressloop.actions.wordpress.media_upload import UPLOAD_MEDIA
from pressloop.contracts import ActionCall, ActionContext, ActionOutcome, Policy, Trigger
from pressloop.contracts import StepStatus as S
from pressloop.local_wordpress import LocalSite
from tests.support.ledger import MemoryLedger


def png(size: int = 1) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    rows = b"".join(b"\x00" + b"\xff\x00\x00" * size for _ in range(size))
    pixels = zlib.compress(rows, 0)  # stored, not squeezed: the size grows with the image
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


DOT = png()
FILES: dict[str, tuple[str, bytes]] = {
    "/img/dot.png": ("image/png", DOT),
    "/img/render?id=7": ("image/png", DOT),  # no file name extension in the URL
    "/page": ("text/html; charset=utf-8", b"<html><body>Not a picture</body></html>"),
    "/logo.svg": ("image/svg+xml", b"<svg xmlns='http://www.w3.org/2000/svg'/>"),
    "/big.png": ("image/png", png(64)),
}


class Files(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/img/dot.png")
            self.end_headers()
            return
        streamed = self.path == "/streamed.png"  # no Content-Length: the size shows while reading
        kind, body = FILES.get("/big.png" if streamed else self.path, ("", b""))
        if not body:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        if not streamed:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        return None


@pytest.fixture
def files() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Files)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


class Uploader:
    def __init__(self, client: WordPressClient, **web: Any) -> None:
        self.client = client
        self.ledger = MemoryLedger()
        self.services = ActionServices(wordpress=client, web=FetchOptions(**web))
        self.executor = Executor(Registry([UPLOAD_MEDIA]), self.services, ledger=self.ledger)
        self.step = 0

    def context(self) -> ActionContext:
        self.step += 1
        return ActionContext(
            run_id="run-media", thread_id="t", trigger=Trigger.CHAT, step_index=self.step,
            policy=Policy(),
        )  # fmt: skip

    async def upload(self, **params: Any) -> ActionOutcome:
        call = ActionCall(id=f"c{self.step}", name="upload_media", params=params)
        return await self.executor.run(call, self.context())

    async def library(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = await self.client.get("/wp/v2/media")
        return items


@pytest.fixture
def allowed(wordpress_client: WordPressClient) -> Uploader:
    return Uploader(wordpress_client, allow_private=True)


async def test_a_file_from_a_url_lands_in_the_media_library(allowed: Uploader, files: str) -> None:
    done = await allowed.upload(url=f"{files}/moved", alt_text="A red dot", title="Dot")
    assert done.status is S.SUCCEEDED, done.content
    item = done.data
    assert item["mime_type"] == "image/png" and f"from {files}/moved" in done.summary
    assert item["host_allowed"] is False  # 127.0.0.1 is not on PRESSLOOP_NET_ALLOW
    stored = await allowed.client.get(f"/wp/v2/media/{item['id']}")
    assert (stored["alt_text"], stored["title"]["raw"]) == ("A red dot", "Dot")
    assert stored["source_url"].endswith("/dot.png")  # the name after the redirect
    async with httpx.AsyncClient() as web:
        assert (await web.get(stored["source_url"])).content == DOT  # the very bytes

    no_extension = await allowed.upload(url=f"{files}/img/render?id=7")
    assert no_extension.status is S.SUCCEEDED, no_extension.content
    assert no_extension.data["url"].endswith("/render.png")

    undo = UPLOAD_MEDIA.undo
    assert undo is not None
    await undo(None, item, allowed.services)
    assert [m["id"] for m in await allowed.library()] == [no_extension.data["id"]]


async def test_loopback_is_refused_unless_allowed(
    wordpress_client: WordPressClient, files: str
) -> None:
    refused = await Uploader(wordpress_client).upload(url=f"{files}/img/dot.png")
    assert refused.status is S.FAILED
    assert "private or loopback" in refused.content
    assert "PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE" in refused.content
    assert await wordpress_client.get("/wp/v2/media") == []


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/page", "is text/html, not an image"),
        ("/logo.svg", "is image/svg+xml, not an image"),
        ("/missing.png", "answered 404"),
        ("/big.png", "larger than the limit of 1000 bytes"),  # said by Content-Length
        ("/streamed.png", "larger than the limit of 1000 bytes"),  # found while reading
    ],
)
async def test_what_is_not_a_media_file_is_refused_and_nothing_is_uploaded(
    wordpress_client: WordPressClient, files: str, path: str, expected: str
) -> None:
    uploader = Uploader(wordpress_client, allow_private=True, max_file_bytes=1000)
    assert len(FILES["/big.png"][1]) > 1000 > len(DOT)
    refused = await uploader.upload(url=files + path)
    assert refused.status is S.FAILED and expected in refused.content, refused.content
    assert await uploader.library() == []


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        (
            {"url": "http://x.example/a.png", "data_base64": "AA==", "filename": "a.png"},
            "exactly one",
        ),
        ({"title": "nothing to upload"}, "exactly one"),
        ({"data_base64": "AA=="}, "filename is needed"),
        ({"url": "ftp://x.example/a.png"}, "only http and https"),
    ],
)
async def test_bad_params_are_named(
    allowed: Uploader, params: dict[str, Any], expected: str
) -> None:
    refused = await allowed.upload(**params)
    assert refused.status is S.FAILED and expected in refused.content, refused.content


async def test_an_interrupted_upload_is_found_by_its_marker_or_by_its_name(
    allowed: Uploader, files: str, wordpress: LocalSite
) -> None:
    reconcile = UPLOAD_MEDIA.reconcile
    assert reconcile is not None
    params = UPLOAD_MEDIA.params.model_validate({"url": f"{files}/img/dot.png"})
    context = allowed.context()
    assert await reconcile(params, context, allowed.services) is None  # nothing made yet
    made = await UPLOAD_MEDIA.handler(params, context, allowed.services)
    found = await reconcile(params, context, allowed.services)
    assert found is not None and found.content["id"] == made.content["id"]
    assert await reconcile(params, allowed.context(), allowed.services) is None  # another step

    # A site without the mu-plugin: the newest upload of that file name is taken.
    (Path(wordpress.docroot) / "wp-content/mu-plugins/pressloop-calls.php").unlink()
    guessed = await reconcile(params, allowed.context(), allowed.services)
    assert guessed is not None and guessed.content["id"] == made.content["id"]
