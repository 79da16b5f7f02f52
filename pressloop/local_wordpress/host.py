"""What the machine must provide for a local WordPress, and how its processes are handled.

Debian's packages (`missing_packages`, `require_packages`), where their programs live (mariadbd
is in /usr/sbin, which a user's PATH may lack), and process groups: `php -S` forks workers that
must go with their master.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
from pathlib import Path

from pressloop.errors import ConfigurationError, PressloopError

DEBIAN_PACKAGES = (
    "wordpress",
    "wordpress-theme-twentytwentythree",
    "php-cli",
    "php-mysql",
    "mariadb-server",
)
WORDPRESS_SOURCE = Path("/usr/share/wordpress")
_SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


class LocalSiteError(PressloopError):
    """The local WordPress could not start, or a command against it failed."""

    code = "local_site_error"


def which(name: str) -> str | None:
    """A program on PATH or in the sbin folders."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    return shutil.which(name, path=path)


def missing_packages() -> list[str]:
    """The Debian packages the local site needs that are not installed (judged by their files)."""
    missing: list[str] = []
    if not (WORDPRESS_SOURCE / "wp-load.php").is_file():
        missing.append("wordpress")
    if not (WORDPRESS_SOURCE / "wp-content/themes/twentytwentythree").is_dir():
        missing.append("wordpress-theme-twentytwentythree")
    php = which("php")
    if php is None:
        missing += ["php-cli", "php-mysql"]
    elif subprocess.run(
        [php, "-r", "exit(extension_loaded('mysqli') ? 0 : 1);"], check=False
    ).returncode:
        missing.append("php-mysql")
    if not all(which(tool) for tool in ("mariadbd", "mariadb-install-db", "mariadb")):
        missing.append("mariadb-server")
    return missing


def require_packages() -> None:
    """Raise a `ConfigurationError` naming the missing Debian packages, if any."""
    if missing := missing_packages():
        raise ConfigurationError(
            "the local WordPress needs Debian packages that are not installed: "
            f"{' '.join(missing)}. Run `bash scripts/ensure-wordpress.sh` (as root) or "
            f"`apt-get install -y --no-install-recommends {' '.join(DEBIAN_PACKAGES)}`"
        )


def tool(name: str) -> str:
    """The path of a program the site needs; naming the packages to install if it is missing."""
    found = which(name)
    if found is None:
        require_packages()
        raise LocalSiteError(f"{name} was not found on PATH")
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def tail(path: Path, lines: int = 15) -> str:
    """The end of a log file, for error messages."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_group(process: subprocess.Popen[bytes] | None, timeout_s: float = 10.0) -> None:
    """Stop a process started in its own session, and everything left in its process group.

    The group gets SIGTERM; once its leader is gone (or after `timeout_s`), whatever is left of
    the group gets SIGKILL: the workers of `php -S` would otherwise keep the port. Their zombies
    are not waited for: they hold no port, and some init processes reap only once a second.
    """
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def os_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def live_mariadbd(pid_file: Path) -> int | None:
    """The pid in `pid_file` if a mariadbd still runs under it (left by a crash, say)."""
    try:
        pid = int(pid_file.read_text())
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return None
    return pid if b"mariadbd" in command else None


def accepts(path: Path) -> bool:
    """Whether something listens on the Unix socket `path`."""
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True
