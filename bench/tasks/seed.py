"""Setting up a task's site: what the freshly restored WordPress holds for it, written over REST as
the admin (plugins are copied into wp-content/plugins: there is no internet to install from)."""

from __future__ import annotations

import shutil
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.local_wordpress import LocalSite

PLUGINS = Path(__file__).resolve().parent / "plugins"
# The benchmark's plugins: file id -> name (files in bench/tasks/plugins/).
BENCH_PLUGINS = {"opening-hours": "Opening Hours", "simple-contact-form": "Simple Contact Form"}


def png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (200, 120, 40)) -> bytes:
    """A small valid PNG (WordPress makes no thumbnails of it, so uploads stay fast)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    row = b"\x00" + bytes(rgb) * width
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(row * height))
        + chunk(b"IEND", b"")
    )


@dataclass
class Seed:
    client: WordPressClient
    site: LocalSite

    async def post(
        self,
        title: str,
        *,
        status: str = "publish",
        content: str = "",
        kind: str = "post",
        categories: list[int] | None = None,
        tags: list[int] | None = None,
        date: str | None = None,
        excerpt: str | None = None,
    ) -> int:
        body: dict[str, Any] = {"title": title, "status": status}
        if content:
            body["content"] = f"<!-- wp:paragraph -->\n<p>{content}</p>\n<!-- /wp:paragraph -->"
        if categories:
            body["categories"] = categories
        if tags:
            body["tags"] = tags
        if date:
            body["date"] = date
        if excerpt is not None:
            body["excerpt"] = excerpt
        made = await self.client.post(f"/wp/v2/{kind}s", body)
        return int(made["id"])

    async def page(self, title: str, **options: Any) -> int:
        return await self.post(title, kind="page", **options)

    async def category(self, name: str) -> int:
        return int((await self.client.post("/wp/v2/categories", {"name": name}))["id"])

    async def tag(self, name: str) -> int:
        return int((await self.client.post("/wp/v2/tags", {"name": name}))["id"])

    async def comment(
        self,
        post: int,
        author: str,
        content: str,
        *,
        status: str = "approve",
        email: str | None = None,
        parent: int = 0,
    ) -> int:
        """A comment by a named visitor; status approve | hold | spam."""
        email = email or author.lower().replace(" ", ".") + "@example.net"
        made = await self.client.post(
            "/wp/v2/comments",
            {
                "post": post,
                "parent": parent,
                "author_name": author,
                "author_email": email,
                "content": content,
            },
        )
        comment_id = int(made["id"])
        if made.get("status") != {"approve": "approved"}.get(status, status):
            await self.client.post(f"/wp/v2/comments/{comment_id}", {"status": status})
        return comment_id

    async def user(self, login: str, email: str, role: str = "subscriber", name: str = "") -> int:
        body = {
            "username": login,
            "email": email,
            "password": "Bench-pass-2026!",
            "roles": [role],
            "name": name or login.title(),
        }
        if name and " " in name:
            body["first_name"], body["last_name"] = name.split(" ", 1)
        return int((await self.client.post("/wp/v2/users", body))["id"])

    async def media(self, filename: str, title: str, alt_text: str = "") -> int:
        fields = {"title": title, "alt_text": alt_text}
        made = await self.client.upload_media(png(), filename, fields=fields)
        return int(made["id"])

    async def plugin(self, file_id: str, *, active: bool = False) -> str:
        """Install one of the benchmark's plugins (copy its file), active or not."""
        target = self.site.docroot / "wp-content" / "plugins" / f"{file_id}.php"
        shutil.copyfile(PLUGINS / f"{file_id}.php", target)
        if active:
            await self.client.post(f"/wp/v2/plugins/{file_id}", {"status": "active"})
        return file_id

    async def settings(self, **values: Any) -> None:
        await self.client.post("/wp/v2/settings", values)
