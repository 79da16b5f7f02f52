"""`spawn_agent`: the agent starts a helper agent on a child thread for parallel work."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pressloop.actions.registry import ActionResult, ActionServices, ActionSpec
from pressloop.contracts import ActionContext, Risk
from pressloop.errors import ActionError


class SpawnParams(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(min_length=1, max_length=8000, description="The helper's task.")
    wait: bool = Field(
        default=False,
        description="Wake this thread with the helper's result when it finishes.",
    )
    title: str = Field(default="", max_length=200)


async def spawn_agent(
    params: SpawnParams, context: ActionContext, services: ActionServices
) -> ActionResult:
    if services.spawner is None:
        raise ActionError("spawning agents is not available in this context")
    # The same step of the same run never spawns twice, even when the run is resumed.
    key = f"{context.run_id}:{context.step_index}"
    child = await services.spawner.spawn(
        context, message=params.message, wait=params.wait, title=params.title, key=key
    )
    return ActionResult(content=child, summary=f"spawned {child['thread_id']}")


SPAWN_ACTIONS = (
    ActionSpec(
        name="spawn_agent",
        description=(
            "Start a helper agent on a child thread with a task. It works on its own (no "
            "destructive actions) and its result is posted back to this thread."
        ),
        params=SpawnParams,
        risk=Risk.WRITE,
        sensitive=True,
        handler=spawn_agent,
    ),
)
