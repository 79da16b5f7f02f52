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

A score says what the CPU reports, not what runs: on an Intel Xeon under a hypervisor that
reports AMX, the sapphirerapids variant scored best and died of SIGILL on its first AMX tile
instruction in a matrix product. So, given the model, the best variant is first tried in a
process of its own (`probe`: load it, read a short prompt, generate two tokens) and passed over
when that process dies; the verdicts are kept beside the model, per CPU (its model name and
flags) and llama.cpp version, so each machine probes once, and another CPU probes again.

Runs only inside the model's own process (or a process that is about to load a model): a
library built for another CPU can only hurt the process that loads it.
"""

from __future__ import annotations

import _ctypes
import ctypes
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import llama_cpp  # loads libllama, and with it ggml (by soname)

from pressloop.errors import ConfigurationError

log = logging.getLogger(__name__)

# libggml-cpu-<variant>.so; a build without variants has one libggml-cpu.so ("single").
_VARIANT_FILE = re.compile(r"^libggml-cpu(?:-(?P<name>.+))?\.so$")
# A probe loads the model and reads a few dozen tokens: seconds, unless the machine is swamped.
PROBE_TIMEOUT_S = 300.0
# Long enough to take the batched matrix products (several tiles), then one token at a time.
PROBE_PROMPT = "Pressloop checks that this CPU runs the model. " * 8
OK = "ok"


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
    # Variants that scored higher but failed their probe on this CPU: name -> how they died.
    passed_over: dict[str, str] = field(default_factory=dict)
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
        passed = "".join(f"; {name} passed over: {why}" for name, why in self.passed_over.items())
        return (
            f"CPU variant {self.chosen.name} (best of {len(self.runnable)} this CPU runs, "
            f"{len(self.offered)} built{passed})"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "variant": self.chosen.name,
            "path": str(self.chosen.path) if self.chosen.path else None,
            "score": self.chosen.score,
            "offered": {v.name: v.score for v in self.offered},
            "passed_over": self.passed_over,
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


def load_cpu_backend(forced: str | None = None, *, probe_model: Path | None = None) -> CpuBackend:
    """Load the best CPU variant this CPU runs (or `forced`: a variant's name, or the path of a
    CPU backend library built elsewhere), once per process. With `probe_model`, the best one
    whose probe with that model passes (see the module). Raises ConfigurationError when no
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
    passed_over: dict[str, str] = {}
    if not forced and probe_model is not None:
        runnable, passed_over = probed_variants(runnable, probe_model)
    chosen = _choose(offered, runnable, forced)
    assert chosen.path is not None
    if not _ggml.ggml_backend_load(str(chosen.path).encode()):
        raise ConfigurationError(f"llama.cpp could not load its CPU backend {chosen.path}")
    _loaded = CpuBackend(
        chosen=chosen, offered=offered, passed_over=passed_over, features=_cpu_features()
    )
    return _loaded


def cpu_identity() -> str:
    """This CPU as the verdicts are kept: its model name and feature flags, and the machine."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    wanted = ("model name", "flags", "Features", "CPU part")
    lines = sorted({line.strip() for line in text.splitlines() if line.startswith(wanted)})
    return "\n".join([os.uname().machine, *lines])


def verdict_file(model: Path) -> Path:
    digest = hashlib.sha256(f"{cpu_identity()}\n{llama_cpp.__version__}".encode()).hexdigest()
    return model.parent / "cpu-variants" / f"{digest[:16]}.json"


def probed_variants(runnable: list[Variant], model: Path) -> tuple[list[Variant], dict[str, str]]:
    """The runnable variants from the best down to the first whose probe passes (the rest are
    not probed), less those that failed; and how the failed ones died."""
    path = verdict_file(model)
    try:
        verdicts: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        verdicts = {}
    failed: dict[str, str] = {}
    ordered = sorted(runnable, key=lambda v: v.score, reverse=True)
    for variant in ordered:
        verdict = verdicts.get(variant.name)
        if verdict is None:
            verdict = probe(variant, model)
            if verdict is not None:  # None: the probe could not tell (timed out)
                verdicts[variant.name] = verdict
                _save_verdicts(path, verdicts)
        if verdict is None or verdict == OK:
            break
        log.warning("llama.cpp's %s variant fails on this CPU: %s", variant.name, verdict)
        failed[variant.name] = verdict
    return [v for v in ordered if v.name not in failed], failed


def _save_verdicts(path: Path, verdicts: dict[str, str]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(verdicts, indent=1, sort_keys=True), encoding="utf-8")
        temporary.replace(path)
    except OSError as problem:  # a read-only cache: the probe runs again next start
        log.warning("could not keep the CPU variant verdicts in %s: %s", path, problem)


def probe(variant: Variant, model: Path, *, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Run `variant` on `model` in a process of its own: "ok", how it died ("SIGILL, ..."), or
    None when it did not finish in time (no verdict: it may only be a busy machine)."""
    command = [sys.executable, "-m", __name__, "--probe", str(variant.path), str(model)]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        log.warning("the probe of llama.cpp's %s variant took over %g s", variant.name, timeout_s)
        return None
    if done.returncode == 0:
        return OK
    last = (done.stderr.strip().splitlines() or ["(no output)"])[-1][:300]
    if done.returncode < 0:
        number = -done.returncode
        name = signal.Signals(number).name if number in signal.valid_signals() else str(number)
        return f"{name} in a test decision (last output: {last})"
    return f"exit status {done.returncode} in a test decision (last output: {last})"


def _run_probe(library: str, model: str) -> int:
    """The probe's own process: load the library and the model, read a prompt, generate."""
    load_cpu_backend(library)
    llama = llama_cpp.Llama(
        model_path=model, n_ctx=512, n_batch=512, n_threads=os.cpu_count() or 1, verbose=False
    )
    llama.create_completion(PROBE_PROMPT, max_tokens=2, temperature=0.0)
    return 0


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
    if argv[:1] == ["--probe"] and len(argv) == 3:
        return _run_probe(argv[1], argv[2])
    try:
        backend = load_cpu_backend(argv[0] if argv else None)
    except ConfigurationError as problem:
        print(problem.message, file=sys.stderr)
        return 1
    print(json.dumps({**backend.as_dict(), "system_info": system_info()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
