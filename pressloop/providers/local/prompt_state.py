"""The system prompt's saved state: whether it is on disk and loadable, and building it.

The local model reads the system prompt's stable part (instructions, the action catalog, the
decision format) and the worked examples before every first answer of a process: about 2,000
tokens, half a minute on 2 cores. The provider saves that state on disk the first time and
restores it at later starts (`pressloop.providers.local.prefix`); `python -m
pressloop.local_model prepare` builds it ahead of time for the catalog the service will use by
default (the built-in actions, the WordPress pack and PRESSLOOP_ACTION_PACKS, as `pressloop
serve` has them with its site), so even the first start after `make run`'s preparation answers
in seconds. The state's key covers the model file and the exact tokens: a changed catalog or
model simply misses it, and the service then reads the prompt as before (and saves the new
state for its next start).

The system prompt comes in as text: building it from the catalog is the job of the layers above
(`pressloop.local_model.prompt`), which may import the actions and the engine; the provider
does not.

Needs the `local` dependency group (llama.cpp): import this module only when it is installed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pressloop.providers.base import ModelRequest
from pressloop.providers.local.messages import stable_count, to_messages
from pressloop.providers.local.model import LocalModel
from pressloop.providers.local.model_file.progress import Reporter, Silent


@dataclass(kw_only=True, frozen=True)
class PromptState:
    path: Path | None  # None: saved states are off (PRESSLOOP_LOCAL_KEEP_PREFIX=false)
    tokens: int
    built: bool = False  # built just now (False: it was already there)
    seconds: float = 0.0
    # Why the file there cannot be loaded here (another llama.cpp version or CPU variant wrote
    # it); None when it can, or when there is no file.
    stale: str | None = None

    @property
    def present(self) -> bool:
        """Saved, and loadable by this process."""
        return self.path is not None and self.path.is_file() and self.stale is None


def stable_messages(model: LocalModel, system: str) -> list[dict[str, str]]:
    """The messages every request with this system prompt starts with."""
    # Only the system prompt decides the stable messages: no transcript, and the response
    # schema shapes the grammar, not the prompt.
    messages = to_messages(
        ModelRequest(system=system, messages=[]), late_system=model.takes_late_system()
    )
    return [
        {"role": m["role"], "content": m["content"]} for m in messages[: stable_count(messages)]
    ]


def prompt_state(model: LocalModel, system: str) -> PromptState:
    """Where this system prompt's state is kept, whether it is there, and whether this process
    may load it."""
    stable = stable_messages(model, system)
    tokens = model.tokens(stable)
    path = model.prefix_state(stable)
    stale = None
    if path is not None and path.is_file() and model.prefixes is not None:
        stale = model.prefixes.mismatch(path, tokens)
    return PromptState(path=path, tokens=len(tokens), stale=stale)


def ensure_prompt_state(
    model: LocalModel, system: str, progress: Reporter | None = None
) -> PromptState:
    """This system prompt's saved state: built now (with progress) unless already there and
    loadable here (a state another llama.cpp or CPU variant wrote is built again)."""
    progress = progress or Silent()
    found = prompt_state(model, system)
    if found.path is None or found.present:
        return found
    stable = stable_messages(model, system)
    label = "reading the system prompt once (its state is saved for every start)"
    progress.start(label, found.tokens, unit="tokens")
    done = 0

    def advance(now: int, _total: int) -> None:
        nonlocal done
        progress.advance(now - done)
        done = now

    began = time.monotonic()
    path = model.save_prefix_state(stable, advance)
    progress.finish()
    return PromptState(path=path, tokens=found.tokens, built=True, seconds=time.monotonic() - began)
