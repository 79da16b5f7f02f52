"""What `pressloop doctor` reports about the local model: built, file present, hash ok."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from pressloop.providers.local.model_file.errors import ModelIntegrityError
from pressloop.providers.local.model_file.prepare import ModelPlace
from pressloop.providers.local.model_file.verify import check_file, stamp_path


@dataclass(kw_only=True, frozen=True)
class LocalModelState:
    runtime: str | None  # "llama-cpp-python 0.3.x" when the `local` group is installed
    path: Path
    present: bool
    cached: bool  # the default model is in PRESSLOOP_MODEL_CACHE (a fresh clone links it)
    hash_ok: bool | None  # None: not checked (no file, or a custom file without a sha256)
    problem: str = ""

    @property
    def ready(self) -> bool:
        return self.runtime is not None and self.present and self.hash_ok is not False


def llama_runtime() -> str | None:
    """The installed llama-cpp-python (the `local` group), found without importing it."""
    if importlib.util.find_spec("llama_cpp") is None:
        return None
    try:
        return f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}"
    except importlib.metadata.PackageNotFoundError:
        return "llama-cpp-python (version unknown)"


def local_model_state(place: ModelPlace, *, rehash: bool = True) -> LocalModelState:
    """The model's state; `rehash` checks the sha256 again even when a stamp vouches for it."""
    path = place.installed
    present = path.is_file()
    expected = place.custom_sha256 if place.custom else place.source.sha256
    size = None if place.custom else place.source.size
    hash_ok: bool | None = None
    problem = ""
    if present and expected:
        if rehash:
            stamp_path(path).unlink(missing_ok=True)
        try:
            check_file(path, size=size, sha256=expected)
            hash_ok = True
        except ModelIntegrityError as refused:
            hash_ok, problem = False, refused.message
    return LocalModelState(
        runtime=llama_runtime(),
        path=path,
        present=present,
        cached=not place.custom and place.cached.is_file(),
        hash_ok=hash_ok,
        problem=problem,
    )
