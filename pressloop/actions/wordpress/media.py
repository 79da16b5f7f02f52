"""Media actions: list, update (alt text, caption, title), delete; uploading is in `media_upload`.

Media has no trash in WordPress: DELETE needs `force=true`, so a deleted file is gone.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.actions.wordpress.common import rendered, site
from pressloop.actions.wordpress.lookup import find_media
from pressloop.actions.wordpress.refs import Pinned, Ref
from pressloop.contracts import ActionContext, Risk


class ListMediaParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    search: str | None = Field(default=None, description="Words in the title or file name.")
    media_type: str | None = Field(
        default=None, description="image, video, audio, text or application."
    )
    per_page: int = Field(default=20, ge=1, le=100, description="How many per page.")
    page: int = Field(default=1, ge=1, description="Which page of results.")


_MEDIA_REF = "The media item: its id, or its title or file name."


class MediaFields(Pinned):
    media: Ref = Field(validation_alias=AliasChoices("media", "id"), description=_MEDIA_REF)
    title: str | None = None
    alt_text: str | None = Field(default=None, description="Alternative text for images.")
    caption: str | None = None
    description: str | None = None

    def changes(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True, exclude={"media"})

    @model_validator(mode="after")
    def _something(self) -> Self:
        if not self.changes():
            raise ValueError("give at least one field to change")
        return self


class MediaId(Pinned):
    media: Ref = Field(validation_alias=AliasChoices("media", "id"), description=_MEDIA_REF)


async def media_id(params: MediaFields | MediaId, services: ActionServices) -> int:
    """The id of the item `params.media` names, looked up once per call (`refs.Pinned`)."""
    pinned = params.pinned("media")
    if pinned is None:
        pinned = int((await find_media(site(services), params.media))["id"])
        params.pin("media", pinned)
    return int(pinned)


def media_item(item: dict[str, Any]) -> dict[str, Any]:
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
    items = [media_item(m) for m in response.data]
    total = response.total if response.total is not None else len(items)
    return ActionResult(
        content={"media": items, "total": total}, summary=f"{len(items)} of {total} media items"
    )


async def fields_before(
    params: MediaFields, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    item_id = await media_id(params, services)
    item = media_item(await site(services).get(f"/wp/v2/media/{item_id}"))
    return {"id": item_id, "fields": {k: item.get(k) for k in params.changes()}}


async def update_media_preview(
    params: MediaFields, context: ActionContext, services: ActionServices
) -> dict[str, Any]:
    before = await fields_before(params, context, services)
    return {"media": before["id"], "before": before["fields"], "after": params.changes()}


async def update_media(
    params: MediaFields, _c: ActionContext, services: ActionServices
) -> ActionResult:
    item_id = await media_id(params, services)
    item = media_item(
        await site(services).post(f"/wp/v2/media/{item_id}", params.changes(), idempotent=True)
    )
    return ActionResult(
        content=item, summary=f"updated media #{item['id']}: {', '.join(params.changes())}"
    )


async def restore_media(
    snapshot: dict[str, Any], _data: Any, services: ActionServices
) -> ActionResult:
    body = {k: v if v is not None else "" for k, v in snapshot["fields"].items()}
    item = media_item(
        await site(services).post(f"/wp/v2/media/{snapshot['id']}", body, idempotent=True)
    )
    return ActionResult(content=item, summary=f"restored media #{item['id']}: {', '.join(body)}")


async def delete_media_preview(
    params: MediaId, _c: ActionContext, services: ActionServices
) -> dict[str, Any]:
    item = media_item(await site(services).get(f"/wp/v2/media/{await media_id(params, services)}"))
    return {"before": item, "after": None}


async def delete_media(
    params: MediaId, _c: ActionContext, services: ActionServices
) -> ActionResult:
    item_id = await media_id(params, services)
    await site(services).delete(f"/wp/v2/media/{item_id}", {"force": True})
    return ActionResult(content={"deleted": item_id}, summary=f"deleted media #{item_id}")


MEDIA_ACTIONS = (
    ActionSpec(
        name="list_media",
        description="List the media library (id, title, URL, type, alt text).",
        params=ListMediaParams,
        risk=Risk.READ,
        untrusted_output=True,  # titles, captions, alt text: whoever uploaded writes them
        handler=list_media,
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
