"""What the engine emits, recorded: the events (`emit`) and the checkpoints (`save`) of a turn."""

from __future__ import annotations

from typing import Any

from pressloop.contracts import Checkpoint, EventType


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[EventType, dict[str, Any]]] = []
        self.checkpoints: list[Checkpoint] = []

    async def emit(self, type_: EventType, data: dict[str, Any]) -> None:
        self.events.append((type_, data))

    async def save(self, checkpoint: Checkpoint) -> None:
        self.checkpoints.append(checkpoint.model_copy(deep=True))

    def types(self) -> list[EventType]:
        return [t for t, _ in self.events]
