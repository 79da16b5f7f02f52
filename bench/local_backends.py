"""llama.cpp's CPU backends compared on this machine: the variant the package picks, the fixed
AVX2 baseline (`haswell`: AVX2, FMA, F16C, BMI2; no AVX-512, no AMX) and a native build
(`-march=native`) that this benchmark compiles for itself and never ships.

The package is built portably (pyproject.toml, `[tool.uv.extra-build-variables]`); the native
backend is built once from the same llama.cpp sources (the sdist uv built the package from), as
the CPU backend target only, and cached under ~/.cache/pressloop/. One process loads one CPU
backend, so each round starts one process per backend; each makes the system prompt's saved
state ready (built in the first round, in a folder per backend: a state is refused by another
variant), then the processes take turns, one decision each (A B C A B C ...), so the machine's
busy spells fall on every backend alike. The first decision of each process is not timed (it
builds the grammar and maps the weights); each timed one reads the site's context and the
request after the saved prefix, and generates the answer.

`python bench/local_backends.py` prints the table; `bench/local_model.py` puts it in its section
of docs/benchmarks.md; `python bench/local_backends.py --native` only builds the native backend
and prints what it reports."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

import llama_cpp
from common import table

from pressloop.config import Settings
from pressloop.local_model.prompt import default_system_prompt
from pressloop.providers.local.model import LocalModel
from pressloop.providers.local.model_file import ModelPlace, prepare
from pressloop.providers.local.options import ModelOptions
from pressloop.providers.local.prompt_state import ensure_prompt_state, stable_messages

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pressloop"
BASELINE = "haswell"  # llama.cpp's AVX2/FMA/F16C/BMI2 variant: every x86-64 server since ~2015
WARMUP = 1  # untimed decisions at the start of each process
# The CPU flags (/proc/cpuinfo) and backend features that tell the variants apart.
FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")
FEATURES = ("AVX2", "FMA", "F16C", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8")
# llama.cpp refuses GGML_NATIVE=ON with GGML_BACKEND_DL (its loader's score function needs the
# instruction sets listed), so the native backend gets GGML_NATIVE's own compiler flag,
# -march=native, directly, and lists no instruction set (its score is then 1: nothing checked).
NATIVE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DCMAKE_C_FLAGS=-march=native",
    "-DCMAKE_CXX_FLAGS=-march=native",
    "-DGGML_NATIVE=OFF",
    *[f"-DGGML_{name}=OFF" for name in ("SSE42", "AVX", "AVX2", "BMI2", "FMA", "F16C")],
    "-DGGML_BACKEND_DL=ON",
    "-DBUILD_SHARED_LIBS=ON",
    "-DCMAKE_SKIP_BUILD_RPATH=ON",  # the build folder is temporary; libggml-base is loaded
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
]


def cpu() -> tuple[str, set[str]]:
    """This CPU's model name and flags, from /proc/cpuinfo."""
    name, flags = "unknown", set()
    with open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    return name, flags


def cpu_flags_line() -> str:
    _name, flags = cpu()
    have = [f for f in FLAGS if f in flags]
    lacks = [f for f in FLAGS if f not in flags]
    return f"CPU flags: {' '.join(have) or 'none'} (of {', '.join(FLAGS)}; lacks: " + (
        f"{' '.join(lacks)})" if lacks else "none)"
    )


def describe(variant: str | None) -> dict[str, object]:
    """What `python -m pressloop.providers.local.backends [VARIANT]` loads, in a process of its
    own: the variant, the path and the features the library reports."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pressloop.providers.local.backends",
            *([variant] if variant else []),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | ({"PRESSLOOP_LOCAL_CPU_VARIANT": variant} if variant else {}),
    )
    if done.returncode != 0:
        raise RuntimeError(f"cannot load CPU backend {variant}: {done.stderr.strip()}")
    found: dict[str, object] = json.loads(done.stdout)
    return found


# The native backend, built by the benchmark.


def native_backend(*, openmp: bool) -> Path:
    """The CPU backend compiled for this CPU (`-march=native`) from the package's own llama.cpp
    sources, built once and cached per llama-cpp-python version and CPU."""
    name, flags = cpu()
    key = hashlib.sha256(f"{name}|{' '.join(sorted(flags))}|openmp={openmp}".encode())
    folder = CACHE / f"bench-native-{llama_cpp.__version__}-{key.hexdigest()[:10]}"
    library = folder / "libggml-cpu.so"
    if library.is_file():
        return library
    folder.mkdir(parents=True, exist_ok=True)
    source = llama_sources()
    print(f"building a native CPU backend from {source} (once)...", file=sys.stderr)
    jobs = str(len(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory() as build, (folder / "build.log").open("w") as log:
        configure = ["cmake", "-S", str(source), "-B", build, *NATIVE_FLAGS]
        configure.append(f"-DGGML_OPENMP={'ON' if openmp else 'OFF'}")
        for command in (configure, ["cmake", "--build", build, "--target", "ggml-cpu", "-j", jobs]):
            log.write(f"$ {' '.join(command)}\n")
            log.flush()
            if subprocess.run(
                command, stdout=log, stderr=subprocess.STDOUT, check=False
            ).returncode:
                raise RuntimeError(f"the native CPU backend did not build: see {log.name}")
        built = next(Path(build).rglob("libggml-cpu.so"))
        shutil.copyfile(built, library.with_suffix(".part"))
    library.with_suffix(".part").replace(library)
    return library


def llama_sources() -> Path:
    """llama.cpp's sources as the installed llama-cpp-python vendors them: the sdist uv built it
    from, or the sdist downloaded (with pip) and unpacked."""
    version = llama_cpp.__version__
    uv_cache = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
    pattern = f"sdists-v*/pypi/llama-cpp-python/{version}/*/src/vendor/llama.cpp/CMakeLists.txt"
    for found in sorted(uv_cache.glob(pattern)):
        return found.parent
    unpacked = CACHE / f"llama-cpp-python-{version}-sdist"
    if not unpacked.is_dir():
        pip = shutil.which("pip3") or shutil.which("pip")
        if pip is None:
            raise RuntimeError("no llama-cpp-python sdist in uv's cache, and no pip to get one")
        with tempfile.TemporaryDirectory() as download:
            subprocess.run(
                [pip, "download", "--no-deps", "--no-binary", ":all:"]
                + [f"llama-cpp-python=={version}", "-d", download],
                check=True,
            )
            with tarfile.open(next(Path(download).glob("*.tar.gz"))) as sdist:
                sdist.extractall(unpacked, filter="data")
    return next(unpacked.glob("*/vendor/llama.cpp"))


# One backend's decisions, in a process of its own (`--worker`).


def worker(options: argparse.Namespace) -> None:
    """Load the model with one CPU backend, make the saved state ready, say so (a JSON line),
    then answer decision N for each line N read on stdin (a JSON line each) until stdin ends."""
    from local_model import REQUESTS, decide  # here: local_model imports this module

    settings = Settings()
    model = LocalModel(
        ModelOptions(
            path=options.model,
            threads=settings.local_threads,
            context_tokens=settings.local_context_tokens,
            batch_tokens=settings.local_batch_tokens,
            prefix_dir=options.states,
            cpu_variant=options.worker,
        )
    )
    llama = model.load()
    system = default_system_prompt(settings.action_packs)
    state = ensure_prompt_state(model, system)
    prefix = model.tokens(stable_messages(model, system))
    assert model.prefixes is not None
    if not state.built and not model.prefixes.restore(llama, prefix):
        raise RuntimeError(f"the saved state was not restored: {model.prefixes.refused}")
    print(json.dumps({"features": model.backend.features}), flush=True)
    for line in sys.stdin:
        llama.n_tokens = len(prefix)  # the site's context and the request are read each time
        llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
        cpu_started = time.process_time()
        answer = decide(model, settings, REQUESTS[int(line) % len(REQUESTS)], options.max_tokens)
        perf = llama_cpp.llama_perf_context(llama._ctx.ctx)
        result = {
            "seconds": answer.seconds,
            "cpu_seconds": time.process_time() - cpu_started,
            "prompt_rate": perf.n_p_eval / max(perf.t_p_eval_ms, 1e-9) * 1000,
            "output_rate": perf.n_eval / max(perf.t_eval_ms, 1e-9) * 1000,
            "prompt_tokens": perf.n_p_eval,
            "output_tokens": answer.completion_tokens,
        }
        print(json.dumps(result), flush=True)


# The comparison.


@dataclass(kw_only=True)
class Backend:
    label: str
    variant: str  # a variant's name, or the path of the native library
    native: bool = False
    features: dict[str, str] = field(default_factory=dict)
    rounds: list[list[dict[str, float]]] = field(default_factory=list)

    def start(self, *, model: Path, states: Path, max_tokens: int) -> subprocess.Popen[str]:
        """A new process for this backend, its saved state ready; starts a new round."""
        process = subprocess.Popen(
            [sys.executable, __file__, "--worker", self.variant, "--model", str(model)]
            + ["--states", str(states), "--max-tokens", str(max_tokens)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.features = self._read(process)["features"]
        self.rounds.append([])
        return process

    def decide(self, process: subprocess.Popen[str], n: int, *, timed: bool) -> None:
        assert process.stdin is not None
        process.stdin.write(f"{n}\n")
        process.stdin.flush()
        result = self._read(process)
        if timed:
            self.rounds[-1].append(result)

    def _read(self, process: subprocess.Popen[str]) -> dict[str, Any]:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{"):  # anything else is llama.cpp talking
                found: dict[str, Any] = json.loads(line)
                return found
        raise RuntimeError(f"the {self.label} process stopped (exit {process.wait()})")

    def median(self, key: str, round_: int | None = None) -> float:
        rounds = self.rounds if round_ is None else [self.rounds[round_]]
        return median(d[key] for r in rounds for d in r)


def backends() -> tuple[list[Backend], list[str]]:
    """The backends to compare, and notes on any that cannot be."""
    picked = describe(None)
    name = str(picked["variant"])
    if name == "built-in":
        return [], ["llama-cpp-python is built with one CPU backend: no variants to compare."]
    chosen = [Backend(label=f"{name} (the package's pick)", variant=name)]
    offered = picked["offered"]
    assert isinstance(offered, dict)
    if name != BASELINE and offered.get(BASELINE, 0) > 0:
        chosen.append(Backend(label=f"{BASELINE} (fixed AVX2 baseline)", variant=BASELINE))
    features = picked["features"]
    assert isinstance(features, dict)
    try:
        native = native_backend(openmp=features.get("OPENMP") == "1")
        describe(str(native))  # it loads here
    except (OSError, RuntimeError, subprocess.CalledProcessError, StopIteration) as problem:
        return chosen, [f"No native backend to compare with: {problem}"]
    chosen.append(Backend(label="native (-march=native)", variant=str(native), native=True))
    return chosen, []


@dataclass(kw_only=True)
class Comparison:
    backends: list[Backend]
    notes: list[str]
    loads: list[float]  # 1-minute load average before the first decision and after each

    def text(self, rounds: int, decisions: int) -> list[str]:
        native = next((b for b in self.backends if b.native), None)
        rows = [self.row(b, native) for b in self.backends]
        header = [
            "CPU backend",
            "compiled with",
            "decisions",
            "median s per decision",
            "vs native",
            "each round vs native",
            "median CPU s per decision",
            "prompt tokens/s",
            "output tokens/s",
            "answer tokens",
        ]
        intro = (
            f"CPU backends (`bench/local_backends.py`), {rounds} round(s): each round starts a "
            "process per backend (one CPU backend per process), makes the system prompt's saved "
            f"state ready in each, then interleaves their decisions one by one (A B C A B C ...): "
            f"{WARMUP} untimed, then {decisions} timed. Each decision reads the site's context "
            f"and the request after the saved prefix (median {self.prompt_tokens():.0f} tokens) "
            "and generates the answer. *vs native*: median seconds per decision over the native "
            "build's (above 1: slower); *CPU s*: the process's CPU time per decision. Token rates "
            "are llama.cpp's own timings, medians per decision. 1-minute load average during the "
            f"comparison: {min(self.loads):.2f}-{max(self.loads):.2f} "
            f"(median {median(self.loads):.2f})."
        )
        notes = [line for note in self.notes for line in (note, "")]
        return [intro, "", *notes, *([table(header, rows), ""] if rows else [])]

    def prompt_tokens(self) -> float:
        return median(b.median("prompt_tokens") for b in self.backends) if self.backends else 0

    @staticmethod
    def row(backend: Backend, native: Backend | None) -> list[str]:
        seconds = backend.median("seconds")
        ratio, each = "-", "-"
        if native is not None:
            ratio = f"{seconds / native.median('seconds'):.2f}"
            each = ", ".join(
                f"{backend.median('seconds', r) / native.median('seconds', r):.2f}"
                for r in range(len(backend.rounds))
            )
        compiled = [f for f in FEATURES if backend.features.get(f) == "1"]
        return [
            backend.label,
            " ".join(compiled),
            str(sum(len(r) for r in backend.rounds)),
            f"{seconds:.2f}",
            ratio,
            each,
            f"{backend.median('cpu_seconds'):.2f}",
            f"{backend.median('prompt_rate'):.0f}",
            f"{backend.median('output_rate'):.1f}",
            f"{backend.median('output_tokens'):.0f}",
        ]


def compare(*, model: Path, rounds: int, decisions: int, max_tokens: int) -> Comparison:
    """Each round starts a process per backend, then interleaves their decisions one by one
    (A B C A B C ...), so a busy spell of the machine falls on all of them alike."""
    chosen, notes = backends()
    loads = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as states:
        for _round in range(rounds):
            with contextlib.ExitStack() as running:
                processes = [
                    running.enter_context(
                        backend.start(
                            model=model, states=Path(states) / str(index), max_tokens=max_tokens
                        )
                    )
                    for index, backend in enumerate(chosen)
                ]
                for n in range(WARMUP + decisions):
                    for backend, process in zip(chosen, processes, strict=True):
                        backend.decide(process, n, timed=n >= WARMUP)
                        loads.append(os.getloadavg()[0])
                for process in processes:
                    assert process.stdin is not None
                    process.stdin.close()
    return Comparison(backends=chosen, notes=notes, loads=loads)


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--decisions", type=int, default=6, help="timed, per round and backend")
    parser.add_argument("--max-tokens", type=int, default=Settings().local_max_tokens)
    parser.add_argument("--native", action="store_true", help="build the native backend only")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--states", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    options = parse(sys.argv[1:] if argv is None else argv)
    if options.worker:
        worker(options)
        return
    if options.native:
        features = describe(None)["features"]
        assert isinstance(features, dict)
        path = native_backend(openmp=features.get("OPENMP") == "1")
        print(json.dumps(describe(str(path)), indent=1))
        return
    model = prepare(ModelPlace.from_settings(Settings()))
    name, _flags = cpu()
    print(f"CPU: {name}\n{cpu_flags_line()}\n")
    found = compare(
        model=model,
        rounds=options.rounds,
        decisions=options.decisions,
        max_tokens=options.max_tokens,
    )
    print("\n".join(found.text(options.rounds, options.decisions)))


if __name__ == "__main__":
    main()
