"""The layering of docs/architecture.md holds: `lint-imports` checks the contracts written in
pyproject.toml ([tool.importlinter]) on the real code, and fails on a copy with an upward import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    # PYTHONPATH first: the copy's `pressloop` is analysed, not the installed one.
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_code_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("engine/loop.py", "import pressloop.store.runs", "The engine knows no database"),
        ("store/ids.py", "import pressloop.runtime.bus", "Imports go downward only"),
        ("providers/base.py", "import pressloop.local_model", "Imports go downward only"),
        ("api/app.py", "import pressloop.ui", "Imports go downward only"),
        ("runtime/bus.py", "import pressloop.store.schema", "Only the store touches the tables"),
        ("ui/render.py", "import sqlalchemy", "SQL is written in the store"),
        ("ui/pages/overview.py", "import pressloop.store.threads", "go through the Service"),
    ],
)
def test_an_import_against_the_layers_is_caught(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    shutil.copytree(
        ROOT / "pressloop", tmp_path / "pressloop", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "pressloop" / module
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0, result.stdout
    broken = result.stdout[result.stdout.index("Broken contracts") :]
    assert contract in broken, result.stdout
