"""Memory actions: the agent keeps short notes across threads and finds them again.

A note written in a tainted turn (untrusted text in front of the model) is stored untrusted:
MEMORY_CONTEXT shows it marked and it taints the turns that receive it; `recall` results that
hold one are untrusted too. `remember` and `forget` are sensitive: in a tainted turn a person
approves them (injected text must not plant or erase standing orders).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec, MemoryPort
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError


class RememberParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, max_length=1000, description="The fact to remember.")
    tags: list[str] = Field(default_factory=list, max_length=10)


class RecallParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(default="", max_length=500, description="Words to look for.")
    limit: int = Field(default=5, ge=1, le=20)


class ForgetParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ids: list[int] = Field(min_length=1, max_length=50, description="Ids from recall.")


def _memory(services: ActionServices) -> MemoryPort:
    if services.memory is None:
        raise ActionError("memory is not available in this context")
    return services.memory


async def remember(
    params: RememberParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    memory_id = await _memory(services).remember(
        context.agent_id, params.content, params.tags, untrusted=bool(context.untrusted)
    )
    return ActionResult(content={"id": memory_id}, summary=f"remembered #{memory_id}")


async def remembered(
    params: RememberParams, context: ActionContext, services: ActionServices
) -> ActionResult | None:
    """An interrupted `remember` took effect if the same note is already stored."""
    for found in await _memory(services).recall(context.agent_id, params.content, 20):
        if found["content"] == params.content:
            return ActionResult(content={"id": found["id"]}, summary=f"remembered #{found['id']}")
    return None


async def recall(
    params: RecallParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    found = await _memory(services).recall(context.agent_id, params.query, params.limit)
    return ActionResult(
        content={"memories": found},
        summary=f"{len(found)} memories found",
        untrusted=any(m.get("untrusted") for m in found),
    )


async def forget(
    params: ForgetParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    removed = await _memory(services).forget(context.agent_id, params.ids)
    return ActionResult(content={"forgotten": removed}, summary=f"forgot {removed} memories")


MEMORY_ACTIONS = (
    ActionSpec(
        name="remember",
        description="Store a short fact or preference to remember in later conversations.",
        params=RememberParams,
        risk=Risk.WRITE,
        sensitive=True,
        handler=remember,
        reconcile=remembered,
    ),
    ActionSpec(
        name="recall",
        description="Find remembered facts by words they contain (newest first if no query).",
        params=RecallParams,
        risk=Risk.READ,
        handler=recall,
    ),
    ActionSpec(
        name="forget",
        description="Delete remembered facts by their ids (as returned by recall).",
        params=ForgetParams,
        risk=Risk.WRITE,
        sensitive=True,
        handler=forget,
    ),
)
