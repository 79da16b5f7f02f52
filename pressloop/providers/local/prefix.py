"""The system prompt's evaluated state, kept on disk so a restart skips its prompt time.

Within a process llama.cpp reuses the tokens it evaluated last. Across restarts that is lost,
and on 2 cores the default catalog's stable prefix (the system prompt's stable part and the
worked examples, about 2,500 tokens) takes 40-60 s to read again. So the state of the model
right after that prefix (its KV cache for sequence 0) is saved once, under a key made of the
model file and the exact tokens, and restored on the next cold start: a changed prompt simply
gets a new key. `python -m pressloop.local_model prepare` saves it for the default catalog
before the first start. A file that cannot be restored is deleted, the prompt evaluated as
usual and its state saved again.

A state is only as portable as the code that computed it: another llama.cpp version may lay the
cache out differently, and another CPU variant of the backend (`backends.py`) computes it with
other kernels, whose rounding differs. So each file starts with a header naming the model key,
the llama.cpp version and the CPU variant that wrote it; a state whose header does not match this
process exactly is refused (deleted, read again, saved again), never loaded. The data directory
may be shared or copied between machines: the header, not the file name, decides.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import llama_cpp

# Old states of prompts that changed are removed beyond this many (each is tens of MB).
KEEP_STATES = 4
# A state file: this line, one line of JSON (the header), then llama.cpp's state bytes.
MAGIC = b"PRESSLOOP-KV 1\n"


def read_header(path: Path) -> dict[str, object] | None:
    """The header of a saved state (None: not a state file of ours)."""
    try:
        with path.open("rb") as file:
            if file.read(len(MAGIC)) != MAGIC:
                return None
            header = json.loads(file.readline())
    except (OSError, ValueError):
        return None
    return header if isinstance(header, dict) else None


class PrefixStore:
    def __init__(self, folder: Path, *, model_key: str, environment: dict[str, str]) -> None:
        """`environment`: what must be the same for a state to be loaded (llama.cpp's version,
        the CPU variant); written in each file's header and checked on restore."""
        self._folder = folder
        self._model_key = model_key
        self._environment = dict(environment)
        self.refused: str | None = None  # why the last state found was not loaded

    def header(self, tokens: Sequence[int]) -> dict[str, object]:
        return {"model": self._model_key, **self._environment, "tokens": len(tokens)}

    def mismatch(self, path: Path, tokens: Sequence[int]) -> str | None:
        """Why the state at `path` cannot be loaded here (None: it can)."""
        found = read_header(path)
        if found is None:
            return "not a saved state of this version of Pressloop"
        expected = self.header(tokens)
        differ = [k for k in expected if found.get(k) != expected[k]]
        if not differ:
            return None
        return (
            "written under "
            + ", ".join(f"{k} {found.get(k)!r}" for k in differ)
            + (" (here: " + ", ".join(f"{k} {expected[k]!r}" for k in differ) + ")")
        )

    def path(self, tokens: Sequence[int]) -> Path:
        digest = hashlib.sha256(self._model_key.encode())
        digest.update(b"".join(t.to_bytes(4, "little", signed=True) for t in tokens))
        return self._folder / f"{digest.hexdigest()[:32]}.kv"

    def restore(self, llama: llama_cpp.Llama, tokens: Sequence[int]) -> bool:
        """Put the saved state of `tokens` into `llama`; False when there is none."""
        path = self.path(tokens)
        if not path.is_file():
            return False
        self.refused = self.mismatch(path, tokens)
        if self.refused is not None:
            path.unlink(missing_ok=True)  # refused, never loaded: read again and saved again
            return False
        try:
            with path.open("rb") as file:
                file.readline()  # the magic line
                file.readline()  # the header
                data = file.read()
        except OSError:
            return False
        llama.reset()  # type: ignore[no-untyped-call]
        llama._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
        buffer = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not llama_cpp.llama_state_seq_set_data(llama._ctx.ctx, buffer, len(data), 0):
            llama._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
            path.unlink(missing_ok=True)  # unreadable: rebuild it
            self.refused = "llama.cpp could not read it"
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
        header = json.dumps(self.header(tokens), sort_keys=True).encode()
        temporary.write_bytes(MAGIC + header + b"\n" + bytes(buffer)[:written])
        temporary.replace(path)
        self._prune(keep=path)

    def _prune(self, *, keep: Path) -> None:
        states = sorted(self._folder.glob("*.kv"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in [p for p in states if p != keep][KEEP_STATES - 1 :]:
            with contextlib.suppress(OSError):
                old.unlink()
