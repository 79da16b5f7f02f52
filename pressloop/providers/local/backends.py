"""Which build of llama.cpp's CPU backend this machine runs: the best variant its CPU supports.

llama.cpp is built portably (pyproject.toml, `[tool.uv.extra-build-variables]`): its CPU backend
is compiled once per CPU generation (`libggml-cpu-haswell.so`, `-skylakex`, `-zen4`,
`-sapphirerapids`, ... on x86-64; `-armv8.2_1`, ... on arm64), side by side in the package, and
none of them for the build machine's CPU. Each variant exports `ggml_backend_score()`, which
reads the running CPU's features (cpuid, hwcap) and answers 0 when the CPU lacks one the variant
was compiled for. llama-cpp-python does not load these libraries itself (model loading then fails
with "no backends are loaded"), so the model process calls `load_cpu_backend` first: it scores
every variant, as ggml's own loader does, and loads the best one, or the one named by
PRESSLOOP_LOCAL_CPU_VARIANT (benchmarks, tests) when this CPU can run it.

Runs only inside the model's own process (or a process that is about to load a model): a
library built for another CPU can only hurt the process that loads it.
"""

from __future__ import annotations

import _ctypes
import ctypes
import os
import re
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import llama_cpp  # loads libllama, and with it ggml (by soname)

from pressloop.errors import ConfigurationError

# libggml-cpu-<variant>.so; a build without variants has one libggml-cpu.so ("single").
_VARIANT_FILE = re.compile(r"^libggml-cpu(?:-(?P<name>.+))?\.so$")


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


# The ggml that libllama itself loaded, found by soname (RTLD_NOLOAD: never a second copy). The
# wheel carries ggml twice, as files, not links; llama_cpp._ggml opens the other copy, whose
# backend registry libllama never sees.
_ggml = ctypes.CDLL("libggml.so.0", mode=os.RTLD_NOLOAD)
_ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
_ggml.ggml_backend_load.restype = ctypes.c_void_p
_ggml.ggml_backend_reg_count.argtypes = []
_ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
_ggml.ggml_backend_reg_get.argtypes = [ctypes.c_size_t]
_ggml.ggml_backend_reg_get.restype = ctypes.c_void_p
_ggml.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
_ggml.ggml_backend_reg_name.restype = ctypes.c_char_p
_ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
_GetFeatures = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)


@dataclass(kw_only=True, frozen=True)
class Variant:
    name: str  # e.g. "zen4"; "built-in" for a build without loadable variants
    path: Path | None
    score: int  # 0: this CPU cannot run it


@dataclass(kw_only=True, frozen=True)
class CpuBackend:
    """The CPU backend this process loaded, and what the package offered."""

    chosen: Variant
    offered: list[Variant] = field(default_factory=list)
    # The features the chosen library was compiled with, as it reports them (e.g. AVX2: 1).
    features: dict[str, str] = field(default_factory=dict)
    llama_cpp_version: str = llama_cpp.__version__

    @property
    def runnable(self) -> list[str]:
        return [v.name for v in self.offered if v.score > 0]

    def describe(self) -> str:
        """One line for `pressloop doctor` and logs."""
        if self.chosen.name == "built-in":
            return "CPU backend built in (one build, no variants)"
        return (
            f"CPU variant {self.chosen.name} (best of {len(self.runnable)} this CPU runs, "
            f"{len(self.offered)} built)"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "variant": self.chosen.name,
            "path": str(self.chosen.path) if self.chosen.path else None,
            "score": self.chosen.score,
            "offered": {v.name: v.score for v in self.offered},
            "features": self.features,
            "llama_cpp_version": self.llama_cpp_version,
        }


_loaded: CpuBackend | None = None


def package_variants() -> list[Variant]:
    """Every CPU variant the installed llama-cpp-python carries, scored for this CPU. The wheel
    installs them beside the package (in site-packages' `bin/`), so they are found through the
    distribution's own list of files."""
    try:
        files = metadata.distribution("llama-cpp-python").files or []
    except metadata.PackageNotFoundError:
        return []
    variants = []
    for file in sorted(files, key=lambda f: f.name):
        match = _VARIANT_FILE.match(file.name)
        if match is not None:
            path = Path(str(file.locate())).resolve()
            score = _score(path)
            # No score function: a build for one baseline, which runs where it was built for.
            name = match["name"] or "single"
            variants.append(Variant(name=name, path=path, score=1 if score is None else score))
    return variants


def _score(path: Path) -> int | None:
    """The library's own score for this CPU (0: cannot run here; None: it has no score, as a
    build for one CPU only). The score function reads cpuid and uses no instruction of the
    variant's own: calling it is how ggml itself picks (ggml_backend_load_best)."""
    library = ctypes.CDLL(str(path), mode=ctypes.RTLD_LOCAL)
    try:
        score = getattr(library, "ggml_backend_score", None)
        if score is None:
            return None
        score.restype = ctypes.c_int
        return int(score())
    finally:
        _ctypes.dlclose(library._handle)


def load_cpu_backend(forced: str | None = None) -> CpuBackend:
    """Load the best CPU variant this CPU runs (or `forced`: a variant's name, or the path of a
    CPU backend library built elsewhere), once per process. Raises ConfigurationError when no
    variant fits."""
    global _loaded
    if _loaded is not None:
        if forced and forced != _loaded.chosen.name:
            raise ConfigurationError(
                f"CPU variant {_loaded.chosen.name} is already loaded in this process"
            )
        return _loaded
    offered = package_variants()
    if not offered:  # a build with the CPU backend linked in: nothing to choose
        _loaded = CpuBackend(
            chosen=Variant(name="built-in", path=None, score=1), features=_cpu_features()
        )
        return _loaded
    runnable = [v for v in offered if v.score > 0]
    chosen = _choose(offered, runnable, forced)
    assert chosen.path is not None
    if not _ggml.ggml_backend_load(str(chosen.path).encode()):
        raise ConfigurationError(f"llama.cpp could not load its CPU backend {chosen.path}")
    _loaded = CpuBackend(chosen=chosen, offered=offered, features=_cpu_features())
    return _loaded


def _choose(offered: list[Variant], runnable: list[Variant], forced: str | None) -> Variant:
    if not forced:
        if not runnable:
            raise ConfigurationError(
                "none of llama.cpp's CPU variants runs on this CPU "
                f"(built: {', '.join(v.name for v in offered)})"
            )
        return max(runnable, key=lambda v: v.score)
    if "/" in forced:  # a CPU backend built elsewhere (the benchmark's native one)
        path = Path(forced)
        if not path.is_file():
            raise ConfigurationError(f"no CPU backend library at {path}")
        score = _score(path)
        chosen: Variant | None = Variant(
            name=path.name, path=path, score=1 if score is None else score
        )
    else:
        chosen = next((v for v in offered if v.name == forced), None)
    if chosen is None:
        names = ", ".join(v.name for v in offered)
        raise ConfigurationError(f"no CPU variant named {forced!r}; this build has: {names}")
    if chosen.score == 0:
        raise ConfigurationError(
            f"this CPU cannot run llama.cpp's {forced} variant (it lacks an instruction set "
            f"that variant needs); it runs: {', '.join(v.name for v in runnable)}"
        )
    return chosen


def _cpu_features() -> dict[str, str]:
    """The registered CPU backend's compiled-in features, as it reports them itself."""
    for index in range(_ggml.ggml_backend_reg_count()):
        reg = _ggml.ggml_backend_reg_get(index)
        if (_ggml.ggml_backend_reg_name(reg) or b"").decode() != "CPU":
            continue
        address = _ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
        if not address:
            return {}
        features = _GetFeatures(address)(reg)
        out: dict[str, str] = {}
        at = 0
        while features[at].name:
            out[features[at].name.decode()] = (features[at].value or b"").decode()
            at += 1
        return out
    return {}


def system_info() -> str:
    """llama.cpp's own summary of what it was built with (after the backend is loaded)."""
    return bytes(llama_cpp.llama_print_system_info()).decode(errors="replace").strip()


def main(argv: list[str]) -> int:
    """`python -m pressloop.providers.local.backends [VARIANT]`: load the CPU backend (the best
    one, or VARIANT) and print what was chosen as JSON, with llama.cpp's system info."""
    import json
    import sys

    try:
        backend = load_cpu_backend(argv[0] if argv else None)
    except ConfigurationError as problem:
        print(problem.message, file=sys.stderr)
        return 1
    print(json.dumps({**backend.as_dict(), "system_info": system_info()}, indent=1))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
