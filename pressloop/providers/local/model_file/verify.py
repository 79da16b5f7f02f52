"""Checking a model file against its expected size and sha256, and remembering that we did.

Hashing 1.1 GB takes a few seconds, too long for every start. After a successful check a stamp
(`<file>.verified`: sha256, size, mtime) is written beside the file; a later start trusts the
file while its size and mtime still match the stamp, and hashes it again otherwise. The stamp
guards against a swapped or damaged download, not against someone who can write to the data
directory (they could change anything there).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from pressloop.providers.local.model_file.errors import ModelIntegrityError
from pressloop.providers.local.model_file.progress import Reporter, Silent

CHUNK = 4 * 1024 * 1024


def stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def sha256_of(path: Path, progress: Reporter | None = None) -> str:
    progress = progress or Silent()
    digest = hashlib.sha256()
    progress.start(f"checking the sha256 of {path.name}", path.stat().st_size)
    with path.open("rb") as file:
        while chunk := file.read(CHUNK):
            digest.update(chunk)
            progress.advance(len(chunk))
    progress.finish()
    return digest.hexdigest()


def mismatch(what: str, path: Path, *, expected: str, found: str) -> ModelIntegrityError:
    return ModelIntegrityError(
        f"{path} is not the expected model file: its {what} is {found}, expected {expected}. "
        "The file was refused and will not be loaded; delete it and prepare the model again "
        "(`make run` or `python -m pressloop.local_model prepare`), or point "
        "PRESSLOOP_LOCAL_MODEL at a file you trust."
    )


def check_file(
    path: Path, *, size: int | None, sha256: str | None, progress: Reporter | None = None
) -> None:
    """Raise `ModelIntegrityError` unless `path` has this size and sha256 (None: not checked).

    A file that passes gets a stamp, so the next check is instant while it stays unchanged.
    """
    found_size = path.stat().st_size
    if size is not None and found_size != size:
        raise mismatch("size", path, expected=f"{size:,} bytes", found=f"{found_size:,} bytes")
    if sha256 is None or has_valid_stamp(path, sha256):
        return
    found = sha256_of(path, progress)
    if found != sha256.lower():
        raise mismatch("sha256", path, expected=sha256.lower(), found=found)
    write_stamp(path, found)


def has_valid_stamp(path: Path, sha256: str) -> bool:
    try:
        stamp = json.loads(stamp_path(path).read_text(encoding="utf-8"))
        info = path.stat()
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp == _stamp(info, sha256.lower())


def write_stamp(path: Path, sha256: str) -> None:
    stamp = stamp_path(path)
    temporary = stamp.with_name(stamp.name + f".{os.getpid()}")
    temporary.write_text(json.dumps(_stamp(path.stat(), sha256)), encoding="utf-8")
    temporary.replace(stamp)


def _stamp(info: os.stat_result, sha256: str) -> dict[str, object]:
    return {"sha256": sha256, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
