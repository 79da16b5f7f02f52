"""Files only the service's own OS user may read: the data directory (0700), the SQLite
database and its companion files and the admin token (0600).

A directory that already exists keeps its mode (it may be one the operator chose and shares);
a database file that already exists loses any group and other permissions.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# SQLite gives these the database file's own mode when it creates them.
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents), the directory itself readable by this user only."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    return path


def write_private(path: Path, text: str) -> None:
    """Write a secret: the file is created 0600 (an existing one is set to 0600 first)."""
    private_dir(path.parent)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        os.fchmod(descriptor, PRIVATE_FILE)
        file.write(text)


def private_sqlite(path: Path) -> None:
    """Create the database file 0600 before SQLite does (so its -wal and -shm files are 0600
    too), and take group and other permissions away from existing ones."""
    private_dir(path.parent)
    # Only a file that is not there yet is opened (and closed): closing any descriptor of a file
    # drops every POSIX lock this process holds on it, and a process with SQLite connections to
    # an existing database (two services in one process) would lose the locks that tell other
    # processes the WAL is in use: they checkpoint and delete it under it ("database disk image
    # is malformed"). SQLite's own connections share their locks and never do that.
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    for file in (path, *(path.with_name(path.name + s) for s in SQLITE_COMPANIONS)):
        _tighten(file)


def _tighten(path: Path) -> None:
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(mode & ~0o077)
    except (FileNotFoundError, PermissionError):  # gone, or not ours: SQLite will say if it can't
        return
