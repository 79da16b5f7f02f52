"""llama.cpp is built portably: its CPU backend in several variants, each compiled for one CPU
generation and none for the build machine's, and the model process loads the best one this CPU
runs. What the libraries report about themselves is checked here, not the build's flags."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from pressloop.config import Settings
from pressloop.providers.local import backends
from pressloop.providers.local.model_file import ModelPlace
from tests.local.conftest import load_with_model

# What each x86-64 variant is compiled for, as llama.cpp's own CMake lists them
# (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS), in the names its backend reports.
X86_SIMD = {
    "SSE3", "SSSE3", "AVX", "AVX_VNNI", "AVX2", "F16C", "FMA", "BMI2", "AVX512",
    "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8",
}  # fmt: skip
_SSE42 = {"SSE3", "SSSE3"}
_HASWELL = _SSE42 | {"AVX", "F16C", "FMA", "AVX2", "BMI2"}
X86_VARIANTS = {
    "x64": set(),
    "sse42": _SSE42,
    "sandybridge": _SSE42 | {"AVX"},
    "ivybridge": _SSE42 | {"AVX", "F16C"},
    "piledriver": _SSE42 | {"AVX", "F16C", "FMA"},
    "haswell": _HASWELL,
    "skylakex": _HASWELL | {"AVX512"},
    "cannonlake": _HASWELL | {"AVX512", "AVX512_VBMI"},
    "cascadelake": _HASWELL | {"AVX512", "AVX512_VNNI"},
    "icelake": _HASWELL | {"AVX512", "AVX512_VBMI", "AVX512_VNNI"},
    "cooperlake": _HASWELL | {"AVX512", "AVX512_VNNI", "AVX512_BF16"},
    "zen4": _HASWELL | {"AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"},
    "alderlake": _HASWELL | {"AVX_VNNI"},
    "sapphirerapids": _HASWELL
    | {"AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_INT8"},
}


def load(variant: str | None = None) -> dict[str, Any]:
    """A fresh process loads the CPU backend (one per process) and reports it."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pressloop.providers.local.backends",
            *([variant] if variant else []),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_build_carries_cpu_variants_and_loads_the_best_this_cpu_runs() -> None:
    best = load()
    offered: dict[str, int] = best["offered"]
    assert len(offered) > 1, offered  # several variants, not one build for one CPU
    runnable = {name for name, score in offered.items() if score > 0}
    assert best["variant"] in runnable
    assert best["score"] == max(offered.values())
    # llama.cpp's own summary names the loaded backend's features.
    assert "CPU" in best["system_info"], best["system_info"]
    if platform.machine() == "x86_64":
        assert set(offered) == set(X86_VARIANTS), offered
        assert {"x64", "sse42"} <= runnable  # every x86-64 CPU runs the baseline


def test_each_variant_reports_exactly_the_instruction_sets_it_was_built_for() -> None:
    # A native build (-march=native) would report every instruction set of the build machine
    # in every library; here each variant reports its own generation's, whatever this CPU has.
    best = load()
    runnable = [name for name, score in best["offered"].items() if score > 0]
    reported: dict[str, set[str]] = {}
    for name in runnable:
        report = load(name)
        assert report["variant"] == name
        features = {k for k, v in report["features"].items() if v == "1"}
        reported[name] = features - {"LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI", "CPU_HBM"}
        if platform.machine() == "x86_64":
            assert reported[name] == X86_VARIANTS[name], (name, report["features"])
    # Each library is its own generation's build (a native one would make them all alike).
    assert len({frozenset(s) for s in reported.values()}) == len(reported), reported
    if platform.machine() == "x86_64":
        assert "AVX512" not in reported["haswell"]


def test_a_variant_this_cpu_cannot_run_is_refused_with_a_clear_error() -> None:
    best = load()
    missing = [name for name, score in best["offered"].items() if score == 0]
    unknown = subprocess.run(
        [sys.executable, "-m", "pressloop.providers.local.backends", "no-such-cpu"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert unknown.returncode == 1
    assert "no CPU variant named 'no-such-cpu'" in unknown.stderr, unknown.stderr
    if missing:  # e.g. sapphirerapids (AMX) on a CPU without AMX: refused, never loaded
        refused = subprocess.run(
            [sys.executable, "-m", "pressloop.providers.local.backends", missing[0]],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert refused.returncode == 1
        assert "this CPU cannot run" in refused.stderr, refused.stderr


# A CPU backend library that scores best and dies of SIGILL when it starts, as the
# sapphirerapids variant did on a hypervisor reporting AMX it did not run (ud2 is SIGILL).
TRAP_LIBRARY = """
int ggml_backend_score(void) { return 1 << 20; }
void *ggml_backend_init(void) { __builtin_trap(); return 0; }
"""


def test_a_variant_that_dies_in_its_probe_is_passed_over_and_the_verdict_kept(
    tmp_path: Path, local_settings: Settings
) -> None:
    model = tmp_path / "model.gguf"
    model.symlink_to(ModelPlace.from_settings(local_settings).installed)
    source = tmp_path / "trap.c"
    source.write_text(TRAP_LIBRARY, encoding="utf-8")
    trap = tmp_path / "libggml-cpu-trap.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(trap), str(source)], check=True)
    variants = {v.name: v for v in backends.package_variants()}
    # A variant every server of this kind runs at a usable speed (x64, without SIMD, takes
    # minutes to read the probe's prompt on a loaded machine).
    baseline = variants["haswell" if platform.machine() == "x86_64" else "armv8.0_1"]
    trapping = backends.Variant(name="trap", path=trap, score=1 << 20)

    verdict = backends.probe(trapping, model)
    assert verdict is not None and verdict.startswith("SIGILL"), verdict
    assert backends.probe(baseline, model) == backends.OK

    runnable, failed = backends.probed_variants([baseline, trapping], model)
    assert [v.name for v in runnable] == [baseline.name] and list(failed) == ["trap"]
    kept = json.loads(backends.verdict_file(model).read_text(encoding="utf-8"))
    assert kept == {"trap": verdict, baseline.name: "ok"}
    # Kept per CPU: the next start does not probe again (a probe would need the library).
    trap.unlink()
    assert backends.probed_variants([baseline, trapping], model)[1] == {"trap": verdict}


def test_the_model_process_runs_a_variant_that_passed_its_probe(
    local_settings: Settings,
) -> None:
    model = ModelPlace.from_settings(local_settings).installed
    report = load_with_model(model)
    kept = json.loads(backends.verdict_file(model).read_text(encoding="utf-8"))
    assert kept[report["variant"]] == "ok", (report, kept)
    for name, why in report["passed_over"].items():
        assert kept[name] == why and report["offered"][name] >= report["score"]
