"""The request body limit, counted on the bytes received (Content-Length and chunked alike).

A pure ASGI middleware in front of everything else (authentication, routing, parsing): it reads
the whole body first, at most `max_bytes` of it, and hands the app the buffered body. A body
declared larger is refused without reading a byte of it; a body that grows past the limit while
it arrives (chunked, or a lying client) is refused as soon as it does, and the connection is
closed so the rest is never read: 413 with `{"error": {"code": "payload_too_large"}}`.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pressloop.api.errors import error_response

CODE = "payload_too_large"
# A message may be up to `max_message_chars` characters; JSON may spend 6 bytes on one (\uXXXX).
BYTES_PER_CHAR = 6
BODY_SLACK_BYTES = 64 * 1024


def default_limit(max_message_chars: int) -> int:
    """Room for the longest message a run accepts, fully escaped, and the rest of its request."""
    return max_message_chars * BYTES_PER_CHAR + BODY_SLACK_BYTES


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def _replay(body: bytes, receive: Receive) -> Receive:
    """The app's `receive`: the buffered body once, then the server's own (a disconnect)."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if delivered:
            return await receive()
        delivered = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


class BodyLimit:
    """Refuse request bodies over `max_bytes` (or a smaller limit for a path in `path_limits`,
    such as the sign-in form) with 413, before the app sees the request."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int, path_limits: Mapping[str, int] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.path_limits = dict(path_limits or {})

    def limit_for(self, path: str) -> int:
        own = self.path_limits.get(path.rstrip("/") or "/")
        return self.max_bytes if own is None else min(own, self.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope["path"])
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            said = f"the request body has {declared} bytes; the limit is {limit}"
            await _refuse(scope, send, said)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before its request was whole: nobody to answer
            body += message.get("body", b"")
            if len(body) > limit:
                await _refuse(scope, send, f"the request body is over the limit of {limit} bytes")
                return
            more = bool(message.get("more_body", False))
        await self.app(scope, _replay(bytes(body), receive), send)


async def _refuse(scope: Scope, send: Send, message: str) -> None:
    # `Connection: close`: the server stops reading this connection, so the unread rest of the
    # body is neither buffered nor parsed as a next request.
    response = error_response(413, CODE, message, headers={"Connection": "close"})

    async def nothing() -> Message:
        return {"type": "http.disconnect"}

    await response(scope, nothing, send)
