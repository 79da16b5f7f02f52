"""The parameters of the post and page actions (their JSON schema is what the model sees)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal

from pydantic import AfterValidator, AliasChoices, BaseModel, ConfigDict, Field

from pressloop.actions.wordpress.refs import Pinned, Ref, RefText
from pressloop.contracts import DICTATED

PostType = Literal["post", "page"]
Status = Literal["draft", "publish", "pending", "private"]
ListStatus = Literal["any", "publish", "draft", "pending", "private", "future", "trash"]

RECONCILE_WINDOW = timedelta(hours=24)
CONTENT_LIMIT = 20_000  # characters of content shown to the model by get_post
ROUTES = {"post": "/wp/v2/posts", "page": "/wp/v2/pages"}
LIVE_STATUSES = "publish,future,draft,pending,private"

TypeArg = Annotated[PostType, Field(description='"post" for blog posts, "page" for pages.')]
PostArg = Annotated[
    Ref,
    Field(
        validation_alias=AliasChoices("post", "id"),  # "id": what the actions took before
        description="The post or page: its id or its title.",
    ),
]
TermRefs = list[Annotated[int, Field(gt=0)] | RefText]
_CONTENT_HELP = (
    "The body as Gutenberg block markup (<!-- wp:paragraph --><p>...</p><!-- /wp:paragraph "
    "-->). Plain text is accepted: paragraphs separated by blank lines become paragraph blocks."
)


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ListPostsParams(_Params):
    type: TypeArg = "post"
    search: str = Field(default="", max_length=200, description="Words to look for.")
    status: ListStatus = Field(default="any", description='"any" = every status except trash.')
    categories: TermRefs = Field(
        default_factory=list,
        max_length=20,
        description="Only posts in these categories (ids or names).",
    )
    # More than 50 is read as 50 (a small model asked for 100), not refused.
    per_page: Annotated[int, AfterValidator(lambda n: min(n, 50))] = Field(
        default=10, ge=1, description="How many per page (at most 50)."
    )
    page: int = Field(default=1, ge=1, description="Which page of results, from 1.")


class GetPostParams(Pinned):
    type: TypeArg = "post"
    post: PostArg


class CreatePostParams(_Params):
    type: TypeArg = "post"
    title: str = Field(min_length=1, max_length=500, description="The title.")
    content: str = Field(default="", max_length=200_000, description=_CONTENT_HELP)
    status: Status = Field(
        default="draft", description="draft (default), publish, pending, private."
    )
    excerpt: str | None = Field(default=None, max_length=2000, description="A short summary.")
    categories: TermRefs | None = Field(
        default=None,
        max_length=20,
        description="Categories, ids or names (posts only).",
        json_schema_extra=DICTATED,
    )
    tags: TermRefs | None = Field(
        default=None,
        max_length=50,
        description="Tags, ids or names (posts only).",
        json_schema_extra=DICTATED,
    )


class UpdatePostParams(Pinned):
    type: TypeArg = "post"
    post: PostArg
    title: str | None = Field(default=None, min_length=1, max_length=500, description="New title.")
    content: str | None = Field(default=None, max_length=200_000, description=_CONTENT_HELP)
    add_content: str | None = Field(
        default=None,
        min_length=1,
        max_length=20_000,
        description="Text added at the end of the current content, which is kept (instead of "
        "content, which replaces it all).",
    )
    excerpt: str | None = Field(default=None, max_length=2000, description="New excerpt.")
    status: Status | None = Field(default=None, description="New status.")
    categories: TermRefs | None = Field(
        default=None,
        max_length=20,
        description="Categories (ids or names); replace the current.",
        json_schema_extra=DICTATED,
    )
    tags: TermRefs | None = Field(
        default=None,
        max_length=50,
        description="Tags (ids or names); replace the current ones.",
        json_schema_extra=DICTATED,
    )


class PostRefParams(Pinned):
    type: TypeArg = "post"
    post: PostArg
