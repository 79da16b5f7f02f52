"""How the local model is loaded: the options the service hands to the model's own process.

No llama.cpp here: the service imports this, the model process turns it into a `LocalModel`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(kw_only=True, frozen=True)
class ModelOptions:
    path: Path
    threads: int  # 0: one per core
    context_tokens: int
    batch_tokens: int
    prefix_dir: Path | None = None  # where the system prompt's state is kept between starts
    cpu_variant: str | None = None  # llama.cpp's CPU variant to load (None: the best one)


def options_to_json(options: ModelOptions) -> str:
    values = asdict(options)
    for key in ("path", "prefix_dir"):
        values[key] = str(values[key]) if values[key] is not None else None
    return json.dumps(values)


def options_from_json(text: str) -> ModelOptions:
    values: dict[str, Any] = json.loads(text)
    values["path"] = Path(values["path"])
    if values.get("prefix_dir") is not None:
        values["prefix_dir"] = Path(values["prefix_dir"])
    return ModelOptions(**values)
