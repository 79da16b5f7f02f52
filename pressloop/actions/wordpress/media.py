"""Media actions: list, upload (from base64 bytes), update (alt text, caption, title), delete.

Uploading from a URL is not offered here: fetching goes through `web_fetch`'s rules (no private
or loopback addresses), which this pack does not duplicate. Media has no trash in WordPress:
DELETE needs `force=true`, so a deleted file is gone.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.common import rendered, site
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError

_MAX_BYTES = 20 * 1024 * 1024


class ListMediaParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str | None = Field(default=None, description="Words in the title or file name.")
    media_type: str | None = Field(
        default=None, description="image, video, audio, text or application."
    )
    per_page: int = Field(default=20, ge=1, le=100, description="How many per page.")
    page: int = Field(default=1, ge=1, description="Which page of results.")


class UploadMediaParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    filename: str = Field(min_length=1, max_length=200, description='E.g. "logo.png".')
    data_base64: str = Field(min_length=1, description="The file's bytes, base64-encoded.")
    title: str | None = Field(default=None, description="Title (defaults to the file name).")
    alt_text: str | None = Field(default=None, description="Alternative text for images.")
    caption: str | None = None


class MediaFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1, description="The media item's id.")
    title: str | None = None
    alt_text: str | None = Field(default=None, description="Alternative text for images.")
    caption: str | None = None
    description: str | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude={"id"})

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.changes():
            raise ValueError("give at least one field to change")
        return self


class MediaId(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int = Field(ge=1, description="The media item's id.")


def _media(item: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": item["id"],
        "title": rendered(item.get("title")),
        "url": item.get("source_url"),
        "mime_type": item.get("mime_type"),
        "alt_text": item.get("alt_text"),
        "caption": rendered(item.get("caption")),
        "description": rendered(item.get("description")),
        "date": item.get("date"),
    }


async def list_media(
    params: ListMediaParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    query = params.model_dump(exclude_none=True) | {"context": "edit"}
    response = await site(services).request("GET", "/wp/v2/media", params=query)
    items = [_media(m) for m in response.data]
    total = response.total if response.total is not None else len(items)
    return ActionResult(
        content={"media": items, "total": total}, summary=f"{len(items)} of {total} media items"
    )


async def upload_media(
    params: UploadMediaParams, _c: ActionContext, services: ActionServices
) -> ActionResult:
    try:
        data = base64.b64decode(params.data_base64, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ActionError("data_base64 is not valid base64") from exc
    if len(data) > _MAX_BYTES:
        raise ActionError(f"the file is larger than {_MAX_BYTES // 1024 // 1024} MB")
    fields = params.model_dump(exclude_none=True, exclude={"filename", "data_base64"})
    item = _media(await site(services).upload_media(data, params.filename, fields=fields))
    return ActionResult(content=item, summary=f"uploaded media #{item['id']} {item['url']}")


async def undo_upload(
    _snapshot: Any, data: dict[str, Any], services: ActionServices
) -> ActionResult:
    await site(services).delete(f"/wp/v2/media/{data['id']}", {"force": True})
    return ActionResult(content={"deleted": data["id"]}, summary=f"deleted media #{data['id']}")


async def fields_before(
    params: MediaFields, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    item = _media(await site(services).get(f"/wp/v2/media/{params.id}"))
    return {"id": params.id, "fields": {k: item.get(k) for k in params.changes()}}


async def update_media_preview(
    params: MediaFields, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    before = await fields_before(params, context, services)
    return {"media": params.id, "before": before["fields"], "after": params.changes()}


async def update_media(
    params: MediaFields, _c: ActionContext, services: ActionServices
) -> ActionResult:
    item = _media(
        await site(services).post(f"/wp/v2/media/{params.id}", params.changes(), idempotent=True)
    )
    return ActionResult(
        content=item, summary=f"updated media #{item['id']}: {', '.join(params.changes())}"
    )


async def restore_media(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    body = {k: v if v is not None else "" for k, v in snapshot["fields"].items()}
    item = _media(
        await site(services).post(f"/wp/v2/media/{snapshot['id']}", body, idempotent=True)
    )
    return ActionResult(content=item, summary=f"restored media #{item['id']}: {', '.join(body)}")


async def delete_media_preview(
    params: MediaId, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    return {"before": _media(await site(services).get(f"/wp/v2/media/{params.id}")), "after": None}


async def delete_media(
    params: MediaId, _c: ActionContext, services: ActionServices
) -> ActionResult:
    await site(services).delete(f"/wp/v2/media/{params.id}", {"force": True})
    return ActionResult(content={"deleted": params.id}, summary=f"deleted media #{params.id}")


MEDIA_ACTIONS = (
    ActionSpec(
        name="list_media",
        description="List the media library (id, title, URL, type, alt text).",
        params=ListMediaParams,
        risk=Risk.READ,
        handler=list_media,
    ),
    ActionSpec(
        name="upload_media",
        description="Upload a file to the media library from base64-encoded bytes.",
        params=UploadMediaParams,
        risk=Risk.WRITE,
        handler=upload_media,
        undo=undo_upload,
    ),
    ActionSpec(
        name="update_media",
        description="Change a media item's title, alt text, caption or description.",
        params=MediaFields,
        risk=Risk.WRITE,
        handler=update_media,
        preview=update_media_preview,
        snapshot=fields_before,
        undo=restore_media,
    ),
    ActionSpec(
        name="delete_media",
        description="Delete a media item and its files permanently. Cannot be undone.",
        params=MediaId,
        risk=Risk.DESTRUCTIVE,
        handler=delete_media,
        preview=delete_media_preview,
    ),
)
