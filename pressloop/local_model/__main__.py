"""`python -m pressloop.local_model prepare | needed`: the local model for `make run`.

- `prepare` fetches, assembles and checks the model (with progress on stderr), then saves the
  system prompt's state for the default catalog (skipped when it is already there; needs the
  `local` group), prints the model's path and exits 0; or exits 1 with a clear message when the
  model cannot be made ready. A state that cannot be built is reported and skipped: the service
  then reads the prompt on its first answer instead.
- `needed` exits 0 when the local provider is the one to use (PRESSLOOP_PROVIDER=local, or no
  provider and no API key configured) and 1 otherwise, so `make run` skips all of this when a
  key is there.
"""

from __future__ import annotations

import sys

from rich.console import Console

from pressloop.config import Settings
from pressloop.errors import PressloopError
from pressloop.providers.local.model_file.prepare import ModelPlace, prepare
from pressloop.providers.local.model_file.progress import Reporter, for_console
from pressloop.providers.local.model_file.state import llama_runtime

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
    settings = Settings()
    place = ModelPlace.from_settings(settings)
    progress = for_console(console)
    try:
        path = prepare(place, progress)
    except PressloopError as problem:
        console.print(f"[bold red]The local model is not ready:[/] {problem.message}")
        return 1
    save_prompt_state(console, settings, progress)
    print(path)
    return 0


def save_prompt_state(console: Console, settings: Settings, progress: Reporter) -> None:
    """The default catalog's system prompt state, built once; any failure only slows the first
    answer, so it is reported, never fatal."""
    if llama_runtime() is None:
        console.print("No saved prompt state: llama.cpp (the `local` group) is not installed.")
        return
    from pressloop.local_model.prompt import default_system_prompt
    from pressloop.providers.local import build_local_model
    from pressloop.providers.local.prompt_state import ensure_prompt_state

    try:
        model = build_local_model(settings)
        try:
            system = default_system_prompt(settings.action_packs)
            state = ensure_prompt_state(model, system, progress)
        finally:
            model.close()
    except PressloopError as problem:
        console.print(f"[yellow]No saved prompt state:[/] {problem.message}")
        return
    if state.path is None:
        console.print("No saved prompt state: PRESSLOOP_LOCAL_KEEP_PREFIX is off.")
    elif state.built:
        console.print(
            f"Saved the system prompt's state ({state.tokens:,} tokens, read in "
            f"{state.seconds:.1f} s): the first answer after a start skips them."
        )
    else:
        console.print(f"The system prompt's state is already saved ({state.tokens:,} tokens).")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
