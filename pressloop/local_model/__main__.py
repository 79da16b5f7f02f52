"""`python -m pressloop.local_model prepare | needed`: the local model for `make run`.

- `prepare` fetches, assembles and checks the model (with progress on stderr), prints its path
  and exits 0; or exits 1 with a clear message when it cannot be made ready.
- `needed` exits 0 when the local provider is the one to use (PRESSLOOP_PROVIDER=local, or no
  provider and no API key configured) and 1 otherwise, so `make run` skips all of this when a
  key is there.
"""

from __future__ import annotations

import sys

from rich.console import Console

from pressloop.config import Settings
from pressloop.errors import PressloopError
from pressloop.local_model.prepare import ModelPlace, prepare
from pressloop.local_model.progress import for_console

USAGE = "usage: python -m pressloop.local_model prepare | needed"
_KEYS = ("openai_api_key", "anthropic_api_key", "openrouter_api_key", "zai_api_key")


def local_needed(settings: Settings) -> bool:
    if settings.provider is not None:
        return settings.provider == "local"
    return not any(getattr(settings, key) for key in _KEYS)


def main(argv: list[str]) -> int:
    console = Console(stderr=True)
    if argv == ["needed"]:
        return 0 if local_needed(Settings()) else 1
    if argv != ["prepare"]:
        console.print(USAGE)
        return 2
    place = ModelPlace.from_settings(Settings())
    try:
        path = prepare(place, for_console(console))
    except PressloopError as problem:
        console.print(f"[bold red]The local model is not ready:[/] {problem.message}")
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
