"""Fixtures for tests against a real WordPress on loopback, never a fake of WordPress.

- `wordpress_packages` (session): installs Debian's packages when they are missing
  (`scripts/ensure-wordpress.sh`); fails, never skips, when that is impossible.
- `wordpress_session` (session): starts one `LocalSite` for the whole session with the test
  plugin (`plugin/pressloop-test-plugin.php`, inactive) and snapshots it right after install.
- `wordpress` (function): that site, restored to the snapshot before the test (database,
  plugins and uploads; about 20 ms), so every test starts from a freshly installed site: the
  admin (id 1), "Hello world!" (post 1), the sample page (2), Akismet and the test plugin.
- `wordpress_client`: a `WordPressClient` for that site, authenticated as the admin with an
  Application Password; no retries and a short timeout, so a broken site fails fast.
- `wp` and `admin`: the action harnesses of `harness.py` on that client.
- `proxy`: a `HoldingProxy` in front of that site, to hold one of its answers.
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.wordpress import WordPressClient
from pressloop.actions.wordpress.admin import ADMIN_ACTIONS
from pressloop.actions.wordpress.content import CONTENT_ACTIONS
from pressloop.local_wordpress import LocalSite, missing_packages
from tests.support.holding_proxy import HoldingProxy
from tests.support.ledger import MemoryLedger
from tests.wordpress.harness import Admin, Harness

ROOT = Path(__file__).resolve().parents[2]
TEST_PLUGIN = Path(__file__).resolve().parent / "plugin" / "pressloop-test-plugin.php"


@pytest.fixture(scope="session")
def wordpress_packages() -> None:
    """Debian's WordPress, PHP and MariaDB packages, installed if missing (as root)."""
    if not missing_packages():
        return
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "ensure-wordpress.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode or missing_packages():
        pytest.fail(
            "the WordPress tests need Debian packages that could not be installed "
            f"({', '.join(missing_packages())}):\n{done.stdout}{done.stderr}"
        )


@pytest.fixture(scope="session")
def wordpress_session(wordpress_packages: None) -> Iterator[LocalSite]:
    """One WordPress for the test session, as installed (use `wordpress` in tests)."""
    site = LocalSite(plugins=[TEST_PLUGIN]).start()
    try:
        site.snapshot()
        yield site
    finally:
        site.stop()


@pytest.fixture
def wordpress(wordpress_session: LocalSite) -> LocalSite:
    """The session's WordPress, reset to the state right after install."""
    wordpress_session.restore()
    return wordpress_session


@pytest.fixture
async def wordpress_client(wordpress: LocalSite) -> AsyncIterator[WordPressClient]:
    """A client for `wordpress`, as its admin."""
    client = WordPressClient(
        wordpress.url, wordpress.admin_user, wordpress.app_password, timeout_s=10, max_retries=0
    )
    yield client
    await client.aclose()


@pytest.fixture
def proxy(wordpress: LocalSite) -> Iterator[HoldingProxy]:
    """`tests/support/holding_proxy.py` in front of `wordpress` (point a worker at `proxy.url`)."""
    with HoldingProxy(wordpress.url).running() as running:
        yield running


@pytest.fixture
def wp(wordpress_client: WordPressClient) -> Harness:
    ledger = MemoryLedger()
    services = ActionServices(wordpress=wordpress_client)
    return Harness(
        wordpress_client, ledger, Executor(Registry(CONTENT_ACTIONS), services, ledger=ledger)
    )


@pytest.fixture
def admin(wordpress_client: WordPressClient) -> Admin:
    ledger = MemoryLedger()
    services = ActionServices(wordpress=wordpress_client)
    return Admin(
        wordpress_client, ledger, Executor(Registry(ADMIN_ACTIONS), services, ledger=ledger)
    )
