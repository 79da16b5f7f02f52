"""How `LocalSite.snapshot()` and `restore()` copy a site: its tables, then its folders."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path


def copy_tables(source: str, target: str, tables: Sequence[str]) -> str:
    """SQL that makes database `target` an exact copy of `tables` in `source`."""
    statements = [
        f"DROP DATABASE IF EXISTS `{target}`",
        f"CREATE DATABASE `{target}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_520_ci",
    ]
    for table in tables:
        statements += [
            f"CREATE TABLE `{target}`.`{table}` LIKE `{source}`.`{table}`",
            f"INSERT INTO `{target}`.`{table}` SELECT * FROM `{source}`.`{table}`",
        ]
    return ";\n".join(statements) + ";\n"


def replace_tree(source: Path, target: Path) -> None:
    """Make `target` a copy of `source` (an empty folder if `source` does not exist)."""
    shutil.rmtree(target, ignore_errors=True)
    if source.exists():
        shutil.copytree(source, target)
    else:
        target.mkdir(parents=True)
