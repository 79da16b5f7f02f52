"""The system prompt's evaluated state, kept on disk so a restart skips its prompt time.

Within a process llama.cpp reuses the tokens it evaluated last. Across restarts that is lost,
and on 2 cores the default catalog's stable prefix (the system prompt's stable part and the
worked examples, about 2,500 tokens) takes 40-60 s to read again. So the state of the model
right after that prefix (its KV cache for sequence 0) is saved once, under a key made of the
model file and the exact tokens, and restored on the next cold start: a changed prompt simply
gets a new key. `python -m pressloop.local_model prepare` saves it for the default catalog
before the first start. A file that cannot be restored is deleted, the prompt evaluated as
usual and its state saved again.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import llama_cpp

# Old states of prompts that changed are removed beyond this many (each is tens of MB).
KEEP_STATES = 4


class PrefixStore:
    def __init__(self, folder: Path, *, model_key: str) -> None:
        self._folder = folder
        self._model_key = model_key

    def path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(self._model_key.encode())
        digest.update(b"".join(t.to_bytes(4, "little", signed=True) for t in tokens))
        return self._folder / f"{digest.hexdigest()[:32]}.kv"

    def restore(self, llama: llama_cpp.Llama, tokens: Sequence[int]) -> bool:
        """Put the saved state of `tokens` into `llama`; False when there is none."""
        path = self.path(tokens)
        try:
            data = path.read_bytes()
        except OSError:
            return False
        llama.reset()  # type: ignore[no-untyped-call]
        llama._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(data), 0):
            llama._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
            path.unlink(missing_ok=True)  # unreadable (another llama.cpp version): rebuild it
            return False
        llama.input_ids[: len(tokens)] = tokens
        llama.n_tokens = len(tokens)
        return True

    def save(self, llama: llama_cpp.Llama, tokens: Sequence[int]) -> None:
        """Save `llama`'s state, which must hold exactly `tokens` evaluated."""
        size = llama_cpp.llama_state_seq_get_size(llama._ctx.ctx, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = llama_cpp.llama_state_seq_get_data(llama._ctx.ctx, buffer, size, 0)
        if not written:
            return
        self._folder.mkdir(parents=True, exist_ok=True)
        path = self.path(tokens)
        temporary = path.with_name(f"{path.name}.{os.getpid()}")
        temporary.write_bytes(bytes(buffer)[:written])
        temporary.replace(path)
        self._prune(keep=path)

    def _prune(self, *, keep: Path) -> None:
        states = sorted(self._folder.glob("*.kv"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in [p for p in states if p != keep][KEEP_STATES - 1 :]:
            with contextlib.suppress(OSError):
                old.unlink()
