"""`upload_media`: a file into the media library, from a URL or from base64-encoded bytes.

From a URL, Pressloop fetches the file itself under `web_fetch`'s rules (`pressloop.actions.net`:
only public addresses unless PRESSLOOP_WEB_FETCH_ALLOW_PRIVATE, the connection pinned to the
checked address, every redirect hop checked; the result's `host_allowed` says whether the host is
on PRESSLOOP_NET_ALLOW), refuses files over PRESSLOOP_MEDIA_MAX_BYTES before or while downloading
them, and accepts only media and document types (a web page or an SVG, which can carry scripts,
is refused). WordPress then checks the file again against its own list of allowed types.

Undo deletes the uploaded item. Reconcile: by the step's marker where the site has the
`pressloop-calls.php` mu-plugin; otherwise the newest item of that file name and type uploaded
within `RECONCILE_WINDOW`.
"""

from __future__ import annotations

import base64
import binascii
import mimetypes
import re
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pressloop.actions.net import Fetched, fetch_public
from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.client import WordPressClient
from pressloop.actions.wordpress.common import site
from pressloop.actions.wordpress.markers import marked, marker_headers
from pressloop.actions.wordpress.media import media_item
from pressloop.actions.wordpress.post_params import RECONCILE_WINDOW
from pressloop.clock import Now
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

_MEDIA = ("image/", "audio/", "video/")
_DOCUMENTS = (
    "application/pdf", "application/msword", "application/vnd.ms-", "text/plain", "text/csv",
    "application/vnd.openxmlformats-officedocument.", "application/vnd.oasis.opendocument.",
)  # fmt: skip
_REFUSED = ("image/svg+xml",)  # scripts inside; WordPress refuses it too


class UploadMediaParams(BaseModel):
    """Exactly one of url or data_base64 gives the file."""

    model_config = ConfigDict(extra="forbid")
    url: str | None = Field(
        default=None, max_length=2000, description="An http(s) URL of the file to upload."
    )
    data_base64: str | None = Field(
        default=None, min_length=1, description="Or the file's bytes, base64-encoded."
    )
    filename: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description='E.g. "logo.png"; needed with data_base64, taken from the URL otherwise.',
    )
    title: str | None = Field(default=None, description="Title (defaults to the file name).")
    alt_text: str | None = Field(default=None, description="Alternative text for images.")
    caption: str | None = Field(default=None, description="Caption shown under the media.")

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.url is None) == (self.data_base64 is None):
            raise ValueError("give exactly one of url or data_base64")
        if self.data_base64 is not None and self.filename is None:
            raise ValueError("a filename is needed with data_base64")
        return self


def _max_bytes(services: ActionServices) -> int:
    return services.web.max_file_bytes  # PRESSLOOP_MEDIA_MAX_BYTES


def _name_from(url: str, kind: str) -> str:
    """The URL's file name, with an extension that matches the type WordPress will check."""
    name = PurePosixPath(unquote(urlsplit(url).path)).name or "download"
    if mimetypes.guess_type(name)[0] != kind and (extension := mimetypes.guess_extension(kind)):
        name = PurePosixPath(name).stem + extension
    return name


async def _fetch_file(url: str, services: ActionServices) -> tuple[Fetched, str]:
    """The file at `url` and its type, or a clear refusal."""
    fetched = await fetch_public(url, services, max_bytes=_max_bytes(services), cut=False)
    kind = fetched.content_type.split(";", 1)[0].strip().lower()
    if not kind or kind.startswith(_REFUSED) or not kind.startswith(_MEDIA + _DOCUMENTS):
        raise ActionError(
            f"{fetched.url} is {kind or 'of no stated type'}, not an image, audio, video or "
            "document file: only those are uploaded to the media library"
        )
    return fetched, kind


async def upload_media(
    params: UploadMediaParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    kind: str | None = None
    fetched: Fetched | None = None
    if params.url is not None:
        fetched, kind = await _fetch_file(params.url, services)
        data, name = fetched.body, _name_from(fetched.url, kind)
    else:
        try:
            data = base64.b64decode(params.data_base64 or "", validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ActionError("data_base64 is not valid base64") from exc
        if len(data) > _max_bytes(services):
            limit = _max_bytes(services)
            raise ActionError(f"the file is larger than {limit} bytes (PRESSLOOP_MEDIA_MAX_BYTES)")
        name = params.filename or "upload"
    fields = params.model_dump(exclude_none=True, include={"title", "alt_text", "caption"})
    item = media_item(
        await site(services).upload_media(
            data,
            params.filename or name,
            content_type=kind,
            fields=fields,
            headers=marker_headers(context),
        )
    )
    source = f" from {params.url}" if params.url else ""
    if fetched is not None:
        item["host_allowed"] = fetched.host_allowed  # the URL's host is on PRESSLOOP_NET_ALLOW
    return ActionResult(content=item, summary=f"uploaded media #{item['id']} {item['url']}{source}")


def _uploaded(item: dict[str, Any]) -> ActionResult:
    found = media_item(item)
    return ActionResult(content=found, summary=f"uploaded media #{found['id']} (found again)")


async def find_upload(
    params: UploadMediaParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """The item an interrupted attempt of this step uploaded, if any (see the module's notes)."""
    client = site(services)
    made = await marked(client, context, "post", ("attachment",))
    if made is not None:
        return _uploaded(await client.get(f"/wp/v2/media/{made[0].id}")) if made else None
    return await _look_alike(client, params, now=services.now)


async def _look_alike(
    client: WordPressClient, params: UploadMediaParams, *, now: Now
) -> ActionResult | None:
    name = params.filename or PurePosixPath(unquote(urlsplit(params.url or "").path)).name
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", PurePosixPath(name).stem).strip("-").lower()
    if not stem:
        return None
    since = now() - RECONCILE_WINDOW
    query: dict[str, Any] = {"search": stem, "orderby": "date", "order": "desc", "per_page": 20}
    for item in await client.get("/wp/v2/media", query):
        file = PurePosixPath(urlsplit(str(item.get("source_url", ""))).path).name.lower()
        made = datetime.fromisoformat(item.get("date_gmt") or "1970-01-01T00:00:00")
        if file.startswith(stem) and made.replace(tzinfo=UTC) >= since:
            return _uploaded(item)
    return None


async def undo_upload(
    _snapshot: Any, data: dict[str, Any], services: ActionServices
) -> ActionResult:
    await site(services).delete(f"/wp/v2/media/{data['id']}", {"force": True})
    return ActionResult(content={"deleted": data["id"]}, summary=f"deleted media #{data['id']}")


UPLOAD_MEDIA = ActionSpec(
    name="upload_media",
    description="Upload a file to the media library from a public URL (an image, audio, video "
    "or document) or from base64-encoded bytes.",
    params=UploadMediaParams,
    risk=Risk.WRITE,
    handler=upload_media,
    network=True,
    reconcile=find_upload,
    undo=undo_upload,
)
