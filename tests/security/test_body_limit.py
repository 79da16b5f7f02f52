"""The body limit counts the bytes received: a chunked body over it is refused with 413 before
authentication and before any parsing, and the server stops reading the connection; a body at
the limit goes through. A real uvicorn on 127.0.0.1 (chunked uploads need a real server)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from urllib.parse import urlencode

from tests.api.conftest import Api, ApiFactory
from tests.security.access_helpers import FORM

LIMIT = 8192


def port_of(api: Api) -> int:
    port = api.client.base_url.port
    assert port is not None
    return port


def chunked_head(path: str, token: str | None = None) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        "Transfer-Encoding: chunked",
    ]
    if token:
        lines.append(f"Authorization: Bearer {token}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


async def read_all(reader: asyncio.StreamReader) -> bytes:
    """Everything the server sends until it closes the connection."""
    received = b""
    try:
        while data := await reader.read(65536):
            received += data
    except ConnectionResetError:
        pass  # closed with our unread upload still in flight: what came before is complete
    return received


def parse(response: bytes) -> tuple[int, dict[str, str], dict[str, object]]:
    head, _, body = response.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {}
    for line in header_lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split()[1]), headers, json.loads(body)


async def test_a_chunked_body_over_the_limit_is_413_before_the_token_is_checked(
    make_api: ApiFactory,
) -> None:
    """The body is not even JSON and there is no token: 413 comes first, the server answers
    while the body is still arriving (it never waits for its end) and closes the connection."""
    api = await make_api(server=True, max_body_bytes=LIMIT)
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(api))
    writer.write(chunked_head("/v1/threads/thr_x/runs"))
    for _ in range(LIMIT // 1024 + 4):
        writer.write(chunk(b"x" * 1024))
    await writer.drain()  # no final 0-chunk: the body never ends
    async with asyncio.timeout(10):
        response = await read_all(reader)
    writer.close()
    status, headers, body = parse(response)
    assert status == 413
    assert headers["connection"] == "close"
    assert body == {
        "error": {
            "code": "payload_too_large",
            "message": f"the request body is over the limit of {LIMIT} bytes",
        }
    }


async def test_a_50_mb_chunked_body_is_not_read_past_the_limit(make_api: ApiFactory) -> None:
    """Uploading 50 MB without a token: the server answers 413 and closes the connection, so
    the upload breaks off after a few socket buffers, far short of 50 MB."""
    api = await make_api(server=True, max_body_bytes=LIMIT)
    reader, writer = await asyncio.open_connection("127.0.0.1", port_of(api))
    total, block = 50 * 1024 * 1024, chunk(b"x" * 65536)
    sent = 0

    async def upload() -> None:
        nonlocal sent
        writer.write(chunked_head("/v1/threads/thr_x/runs"))
        while sent < total:
            writer.write(block)
            await writer.drain()
            sent += 65536
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    uploading = asyncio.create_task(upload())
    async with asyncio.timeout(20):
        response = await read_all(reader)
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            await uploading
    writer.close()
    assert parse(response)[0] == 413
    assert sent < total // 4, f"the server read {sent} bytes of the upload"


async def test_a_chunked_body_at_the_limit_is_accepted_and_one_byte_more_is_not(
    make_api: ApiFactory,
) -> None:
    api = await make_api([{"text": "ok"}], server=True, max_body_bytes=LIMIT)
    thread_id = await api.thread()
    url = f"/v1/threads/{thread_id}/runs"
    request = json.dumps({"message": "hi", "mode": "background"}).encode()

    def padded(size: int) -> bytes:
        body = request[:-1] + b" " * (size - len(request)) + b"}"  # JSON allows the spaces
        assert len(body) == size
        return body

    async def chunks(body: bytes) -> AsyncIterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    headers = {**api.auth(), "Content-Type": "application/json"}
    at_limit = await api.client.post(url, content=chunks(padded(LIMIT)), headers=headers)
    assert at_limit.status_code == 202, at_limit.text
    assert at_limit.json()["run"]["input"] == "hi"

    over = await api.client.post(url, content=chunks(padded(LIMIT + 1)), headers=headers)
    assert over.status_code == 413 and over.json()["error"]["code"] == "payload_too_large"
    # At the limit, the token is checked as ever.
    no_token = await api.client.post(
        url, content=chunks(padded(LIMIT)), headers={"Content-Type": "application/json"}
    )
    assert no_token.status_code == 401
    runs = (await api.client.get("/v1/runs", headers=api.auth())).json()
    assert len(runs) == 1


async def test_a_declared_body_over_the_limit_is_413_unread(make_api: ApiFactory) -> None:
    api = await make_api(max_body_bytes=LIMIT)
    refused = await api.client.post("/v1/threads", content=b"{" + b" " * LIMIT + b"}")
    assert refused.status_code == 413
    assert refused.json()["error"] == {
        "code": "payload_too_large",
        "message": f"the request body has {LIMIT + 2} bytes; the limit is {LIMIT}",
    }


async def test_the_sign_in_form_is_capped_at_4_kb_chunked_or_not(make_api: ApiFactory) -> None:
    api = await make_api()
    form = urlencode({"token": "plt_x" * 1000}).encode()  # 5 kB: no token is that long

    async def chunked() -> AsyncIterator[bytes]:
        for start in range(0, len(form), 512):
            yield form[start : start + 512]

    for content in (form, chunked()):
        refused = await api.client.post("/ui/login", content=content, headers=FORM)
        assert refused.status_code == 413, refused.text
        assert refused.json()["error"]["code"] == "payload_too_large"
        assert "4096" in refused.json()["error"]["message"]
    wrong = await api.client.post("/ui/login", content=b"token=plt_wrong", headers=FORM)
    assert wrong.status_code == 401
    signed_in = await api.client.post(
        "/ui/login", content=urlencode({"token": api.tokens["viewer"]}), headers=FORM
    )
    assert signed_in.status_code == 303
