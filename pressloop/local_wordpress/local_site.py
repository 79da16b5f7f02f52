"""A private WordPress on 127.0.0.1, started by code: for the tests and for `make run`.

The recipe (issue 4, measured on Debian 12 with WordPress 6.1, PHP 8.2 and MariaDB 10.11):

1. A private MariaDB: `mariadb-install-db` into a data directory (on /dev/shm when it exists:
   about three times faster), then `mariadbd` on a Unix socket only (`--skip-networking`), in
   its own process group.
2. A copy of Debian's `/usr/share/wordpress` (a copy, not a link: PHP resolves `__FILE__`
   through links and Debian's own config lookup would take over) with our own `wp-config.php`
   (`WP_ENVIRONMENT_TYPE` `local`, which Application Passwords need over plain HTTP) and two
   mu-plugins: one reports mail as sent (there is no mail server), the other is
   `pressloop-calls.php`, which a real site installs too (exact reconcile of creates).
3. Install from PHP before serving (`php/install.php`): `wp_install`, pretty permalinks, an
   Application Password for the admin.
4. Serve with PHP's built-in server and 4 workers (one worker deadlocks any request in which
   WordPress calls itself) and a router that sends non-files to `index.php`, in its own process
   group: killing only the master would leave the workers on the port.

`snapshot()` copies the database (into a second database, table by table) and the
`wp-content/plugins`, `mu-plugins` and `uploads` folders; `restore()` copies them back, so each
test starts from the same site. WP-CLI does not exist here: `run_php()` runs PHP with WordPress
loaded.

The class is synchronous on purpose: it manages processes, and is used from pytest's session
fixtures and from the command line before the event loop starts.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from pressloop.local_wordpress import host
from pressloop.local_wordpress.host import LocalSiteError
from pressloop.local_wordpress.snapshots import copy_tables, replace_tree

DB_NAME = "wordpress"
SNAPSHOT_DB = "pressloop_snapshot"
# The same for mariadb-install-db and mariadbd: a 16 MB redo log keeps the data directory (in RAM
# on /dev/shm) at about 30 MB instead of 113 MB, at no cost in speed.
_INNODB = ("--innodb-log-file-size=16M",)
_SNAPSHOT_FOLDERS = ("plugins", "mu-plugins", "uploads")
# php/ file -> its name in wp-content/mu-plugins
MU_PLUGINS = {"mu-plugin.php": "pressloop-local.php", "pressloop-calls.php": "pressloop-calls.php"}
_PHP_INI = (
    "-d", "memory_limit=256M", "-d", "upload_max_filesize=64M", "-d", "post_max_size=64M",
)  # fmt: skip


def _php_literal(value: str | bool) -> str:
    """A PHP literal; strings single-quoted: no interpolation, only \\ and ' are escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@dataclass(kw_only=True, eq=False)
class LocalSite:
    """A WordPress on 127.0.0.1 with its own MariaDB; `start()` it, `stop()` it.

    `root` holds everything (database, WordPress copy, logs, `site.json` with the credentials).
    Without one, a temporary folder (on /dev/shm when it exists) is made and removed on
    `stop()`. With one, the site is kept: the next `start()` on the same root serves the same
    site, on the same port, with the same passwords (how `make run` keeps a newcomer's site).
    """

    root: Path | None = None
    port: int = 0  # 0: a free port, chosen at install
    title: str = "Pressloop Local"
    admin_user: str = "admin"
    admin_email: str = "admin@example.com"
    admin_password: str = field(default_factory=lambda: secrets.token_urlsafe(12), repr=False)
    permalink_structure: str = "/%postname%/"
    plugins: Sequence[Path] = ()  # files or folders copied into wp-content/plugins at install
    workers: int = 4
    start_timeout_s: float = 30.0
    app_password: str = field(default="", init=False, repr=False)
    _temporary: bool = field(default=False, init=False, repr=False)
    _mariadbd: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _php_server: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    _snapshot_tables: list[str] = field(default_factory=list, init=False, repr=False)

    @property
    def url(self) -> str:
        """The site's address, without a trailing slash."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def home(self) -> Path:
        if self.root is None:
            raise LocalSiteError("the local site has not been started")
        return self.root

    @property
    def docroot(self) -> Path:
        return self.home / "wordpress"

    @property
    def socket_path(self) -> Path:
        return self.home / "mysqld.sock"

    def _server_tmpdir(self) -> str:
        """Where the private MariaDB keeps its temporary tables: in its own home, not the shared
        /tmp, where another MariaDB starting at the same moment (a second test worker, a site
        being installed) was seen to remove them under it ("Could not remove temporary table",
        mariadb-install-db aborting)."""
        tmp = self.home / "mysql-tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return f"--tmpdir={tmp}"

    @property
    def running(self) -> bool:
        return self._php_server is not None and self._php_server.poll() is None

    def settings_env(self) -> dict[str, str]:
        """The Pressloop settings that point at this site."""
        return {
            "PRESSLOOP_WP_URL": self.url,
            "PRESSLOOP_WP_USER": self.admin_user,
            "PRESSLOOP_WP_APP_PASSWORD": self.app_password,
        }

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> LocalSite:
        """Install (on a new root) or reuse (on a kept root) the site, then serve it."""
        if self.running:
            return self
        host.require_packages()
        if self.root is None:
            shm = Path("/dev/shm")
            base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
            self.root = Path(tempfile.mkdtemp(prefix="pressloop-wp-", dir=base))
            self._temporary = True
        self.root.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        try:
            state = self.home / "site.json"
            if state.is_file():
                self._load_state(state)
                self._write_mu_plugins()  # a kept site gets the current versions too
                self._start_mariadbd()
            else:
                self._install()
            self._start_php_server()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the PHP server and MariaDB; remove the root if it was a temporary one."""
        atexit.unregister(self.stop)
        host.stop_group(self._php_server)
        host.stop_group(self._mariadbd, timeout_s=30.0)
        self._php_server = self._mariadbd = None
        if self._temporary and self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
            self._temporary = False

    def __enter__(self) -> LocalSite:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- snapshots and commands ---------------------------------------------------------------

    def snapshot(self) -> None:
        """Remember the database and the plugins, mu-plugins and uploads folders as they are."""
        tables = self.sql(f"SHOW TABLES FROM `{DB_NAME}`").split()
        self.sql(copy_tables(DB_NAME, SNAPSHOT_DB, tables))
        self._snapshot_tables = tables
        for name in _SNAPSHOT_FOLDERS:
            replace_tree(self.docroot / "wp-content" / name, self.home / "snapshot" / name)

    def restore(self) -> None:
        """Put back what `snapshot()` saw: every table, plugin and upload (tens of ms)."""
        if not self._snapshot_tables:
            raise LocalSiteError("restore() needs a snapshot() first")
        self.sql(copy_tables(SNAPSHOT_DB, DB_NAME, self._snapshot_tables))
        for name in _SNAPSHOT_FOLDERS:
            replace_tree(self.home / "snapshot" / name, self.docroot / "wp-content" / name)

    def sql(self, statements: str) -> str:
        """Run SQL through the `mariadb` client on the site's socket; the tab-separated output."""
        done = subprocess.run(
            [host.tool("mariadb"), "--no-defaults", f"--socket={self.socket_path}", "--batch",
             "--skip-column-names", f"--user={host.os_user()}"],
            input=statements.encode(), capture_output=True, check=False, timeout=60,
        )  # fmt: skip
        if done.returncode:
            raise LocalSiteError(f"SQL failed: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout.decode()

    def run_php(self, code: str, *, timeout_s: float = 60.0) -> str:
        """Run PHP statements with WordPress loaded (as WP-CLI's `eval` would); what they echo.

        `run_php("echo get_option('blogname');")` -> "Pressloop Local".
        """
        body = code.strip().removeprefix("<?php")
        script = (
            "<?php\n"
            f"$_SERVER['HTTP_HOST'] = {_php_literal(f'127.0.0.1:{self.port}')};\n"
            "$_SERVER['SERVER_NAME'] = '127.0.0.1';\n"
            "define('WP_DISABLE_FATAL_ERROR_HANDLER', true);\n"  # the error, not an HTML page
            f"require {_php_literal(str(self.docroot / 'wp-load.php'))};\n"
            f"{body}\n"
        )
        return self._php([], stdin=script, timeout_s=timeout_s)

    # -- the recipe -----------------------------------------------------------------------------

    def _php(self, args: list[str], *, stdin: str, timeout_s: float = 60.0) -> str:
        try:
            done = subprocess.run(
                [host.tool("php"), *_PHP_INI, "-d", "display_errors=stderr", *args],
                input=stdin.encode(), capture_output=True, cwd=self.docroot, timeout=timeout_s,
                check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise LocalSiteError(f"PHP did not finish within {timeout_s:g} s") from exc
        if done.returncode:
            output = (done.stderr.strip() or done.stdout.strip()).decode(errors="replace")
            raise LocalSiteError(f"PHP exited with {done.returncode}: {output[-2000:]}")
        return done.stdout.decode()

    def _install(self) -> None:
        data = self.home / "mysql"
        shutil.rmtree(data, ignore_errors=True)
        done = subprocess.run(
            [host.tool("mariadb-install-db"), "--no-defaults", f"--datadir={data}",
             "--auth-root-authentication-method=socket", f"--user={host.os_user()}",
             "--skip-test-db", self._server_tmpdir(), *_INNODB],
            capture_output=True, check=False,
        )  # fmt: skip
        if done.returncode:
            log = (done.stdout + done.stderr).decode(errors="replace")[-2000:]
            raise LocalSiteError(f"mariadb-install-db failed: {log}")
        self._start_mariadbd()
        self.sql(
            f"CREATE DATABASE `{DB_NAME}` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_520_ci"
        )

        self.port = self.port or host.free_port()
        shutil.rmtree(self.docroot, ignore_errors=True)
        shutil.copytree(host.WORDPRESS_SOURCE, self.docroot)  # links followed: files are copied
        (self.docroot / "wp-config.php").write_text(self._wp_config())
        content = self.docroot / "wp-content"
        self._write_mu_plugins()  # before install: wp_install sends mail
        (content / "uploads").mkdir(exist_ok=True)
        for plugin in self.plugins:
            target = content / "plugins" / plugin.name
            if plugin.is_dir():
                shutil.copytree(plugin, target)
            else:
                shutil.copyfile(plugin, target)

        settings = {
            "title": self.title,
            "admin_user": self.admin_user,
            "admin_password": self.admin_password,
            "admin_email": self.admin_email,
            "permalink_structure": self.permalink_structure,
        }
        installer = self.home / "install.php"
        installer.write_text(_php_file("install.php"))
        output = self._php([str(installer), str(self.docroot)], stdin=json.dumps(settings))
        self.app_password = json.loads(output)["app_password"]
        self._save_state(self.home / "site.json")

    def _write_mu_plugins(self) -> None:
        folder = self.docroot / "wp-content" / "mu-plugins"
        folder.mkdir(exist_ok=True)
        for source, target in MU_PLUGINS.items():
            (folder / target).write_text(_php_file(source))

    def _wp_config(self) -> str:
        defines: dict[str, str | bool] = {
            "DB_NAME": DB_NAME,
            "DB_USER": host.os_user(),
            "DB_PASSWORD": "",
            "DB_HOST": f"localhost:{self.socket_path}",
            "DB_CHARSET": "utf8mb4",
            "DB_COLLATE": "",
            "WP_ENVIRONMENT_TYPE": "local",  # Application Passwords over plain HTTP
            "WP_HOME": self.url,
            "WP_SITEURL": self.url,
            "DISABLE_WP_CRON": True,
            "WP_HTTP_BLOCK_EXTERNAL": True,  # no internet here; loopback stays allowed
            "AUTOMATIC_UPDATER_DISABLED": True,
            "FS_METHOD": "direct",  # plugin deletion writes files as this user
            "WP_DEBUG": False,
            "WP_DEBUG_DISPLAY": False,
        }
        for key in ("AUTH", "SECURE_AUTH", "LOGGED_IN", "NONCE"):
            defines[f"{key}_KEY"] = secrets.token_urlsafe(48)
            defines[f"{key}_SALT"] = secrets.token_urlsafe(48)
        lines = ["<?php", "// Written by pressloop/local_wordpress/local_site.py."]
        lines += [f"define('{name}', {_php_literal(value)});" for name, value in defines.items()]
        lines += [
            "$table_prefix = 'wp_';",
            "if (!defined('ABSPATH')) { define('ABSPATH', __DIR__ . '/'); }",
            "require_once ABSPATH . 'wp-settings.php';",
        ]
        return "\n".join(lines) + "\n"

    def _start_mariadbd(self) -> None:
        pid_file = self.home / "mysqld.pid"
        if pid := host.live_mariadbd(pid_file):
            raise LocalSiteError(
                f"a MariaDB already runs on {self.home} (pid {pid}): is the site started "
                "elsewhere? Stop that process first"
            )
        self.socket_path.unlink(missing_ok=True)
        log = self.home / "mysqld.log"
        self._mariadbd = subprocess.Popen(
            [host.tool("mariadbd"), "--no-defaults", f"--datadir={self.home / 'mysql'}",
             f"--socket={self.socket_path}", "--skip-networking",
             "--innodb-flush-log-at-trx-commit=0", "--skip-log-bin", f"--user={host.os_user()}",
             self._server_tmpdir(), *_INNODB,
             f"--pid-file={pid_file}", f"--log-error={log}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        while not host.accepts(self.socket_path):
            if self._mariadbd.poll() is not None or time.monotonic() > deadline:
                raise LocalSiteError(f"mariadbd did not start; {log}:\n{host.tail(log)}")
            time.sleep(0.01)

    def _start_php_server(self) -> None:
        router = self.home / "router.php"
        router.write_text(_php_file("router.php"))
        log = self.home / "php-server.log"
        with log.open("ab") as output:
            self._php_server = subprocess.Popen(
                [host.tool("php"), *_PHP_INI, "-d", "display_errors=0", "-d", "log_errors=1",
                 "-S", f"127.0.0.1:{self.port}", "-t", str(self.docroot), str(router)],
                env={**os.environ, "PHP_CLI_SERVER_WORKERS": str(self.workers)},
                stdin=subprocess.DEVNULL, stdout=output, stderr=output, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + self.start_timeout_s
        with httpx.Client(timeout=5.0) as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(f"{self.url}/wp-json/").status_code == 200:
                        return
                if self._php_server.poll() is not None or time.monotonic() > deadline:
                    raise LocalSiteError(
                        f"WordPress did not answer on {self.url}/wp-json/; {log}:\n{host.tail(log)}"
                    )
                time.sleep(0.02)

    def _save_state(self, path: Path) -> None:
        state = {
            "port": self.port,
            "admin_user": self.admin_user,
            "admin_password": self.admin_password,
            "app_password": self.app_password,
        }
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump(state, file)

    def _load_state(self, path: Path) -> None:
        state: dict[str, Any] = json.loads(path.read_text())
        self.port = int(state["port"])
        self.admin_user = state["admin_user"]
        self.admin_password = state["admin_password"]
        self.app_password = state["app_password"]


def _php_file(name: str) -> str:
    return resources.files(__package__).joinpath("php", name).read_text()
