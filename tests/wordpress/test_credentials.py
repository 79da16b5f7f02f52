"""Wrong site credentials are caught, on the real WordPress: WordPress reads a call with a wrong
Application Password as an anonymous visitor's, so `pressloop doctor` and `pressloop serve` sign
in for real (`/wp/v2/users/me`), `get_site_context` refuses to read the site anonymously, and the
actions' refusals name PRESSLOOP_WP_USER and PRESSLOOP_WP_APP_PASSWORD."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from pressloop.actions.executor import Executor
from pressloop.actions.registry import ActionServices, Registry
from pressloop.actions.wordpress import WORDPRESS_ACTIONS, WordPressClient
from pressloop.contracts import StepStatus
from pressloop.local_wordpress.local_site import LocalSite
from tests.cli.conftest import Pressloop, Result, cli_env, pressloop  # noqa: F401
from tests.support.ledger import MemoryLedger
from tests.support.serve import Serve
from tests.wordpress.harness import Harness

WRONG = "abcd efgh ijkl mnop qrst uvwx"  # shaped like an Application Password, not one
SETTINGS = "check PRESSLOOP_WP_USER and PRESSLOOP_WP_APP_PASSWORD"


def site_env(site: LocalSite, tmp_path: Path, **changed: str) -> dict[str, str]:
    """The site's settings (with `changed` ones), an empty model cache (doctor's local model
    line stays a quick "info") and wide lines."""
    return {
        **site.settings_env(),
        **changed,
        "PRESSLOOP_MODEL_CACHE": str(tmp_path / "model-cache"),
        "COLUMNS": "400",
    }


def wordpress_line(result: Result) -> tuple[str, str]:
    lines = result.out.splitlines()
    at = next((i for i, x in enumerate(lines) if " wordpress: " in x), None)
    assert at is not None, result.out + result.err
    hint = lines[at + 1].strip() if at + 1 < len(lines) and "hint:" in lines[at + 1] else ""
    return lines[at].strip(), hint


async def test_doctor_signs_in_and_names_the_settings_when_wordpress_refuses(
    pressloop: Pressloop,  # noqa: F811
    wordpress: LocalSite,
    tmp_path: Path,
) -> None:
    right, wrong = await asyncio.gather(
        pressloop("doctor", env=site_env(wordpress, tmp_path)),
        pressloop("doctor", env=site_env(wordpress, tmp_path, PRESSLOOP_WP_APP_PASSWORD=WRONG)),
    )
    line, hint = wordpress_line(right)
    assert line == f"ok  wordpress: {wordpress.url} as admin (roles: administrator)", line
    assert hint == ""

    line, hint = wordpress_line(wrong)
    assert wrong.code == 1
    assert line.startswith(f"fail  wordpress: {wordpress.url} did not sign in 'admin'"), line
    assert "WordPress answered 401 rest_not_logged_in: You are not currently logged in." in line
    assert SETTINGS in line
    assert "PRESSLOOP_WP_USER" in hint and "PRESSLOOP_WP_APP_PASSWORD" in hint


async def test_doctor_warns_when_the_user_cannot_manage_the_site(
    pressloop: Pressloop,  # noqa: F811
    wordpress: LocalSite,
    tmp_path: Path,
) -> None:
    password = wordpress.run_php(
        "$id = wp_create_user('reader', 'secret-reader', 'reader@example.com');"
        "echo WP_Application_Passwords::create_new_application_password($id, ['name' => 't'])[0];"
    )
    env = site_env(
        wordpress, tmp_path, PRESSLOOP_WP_USER="reader", PRESSLOOP_WP_APP_PASSWORD=password
    )
    line, hint = wordpress_line(await pressloop("doctor", env=env))
    assert line == (
        f"warn  wordpress: {wordpress.url} as reader (roles: subscriber) cannot manage the site "
        "(no administrator or editor capability)"
    ), line
    assert "give 'reader' the Administrator (or Editor) role" in hint


async def test_serve_warns_at_start_when_wordpress_refuses_the_credentials(
    cli_env: dict[str, str],  # noqa: F811
    wordpress: LocalSite,
    tmp_path: Path,
) -> None:
    env = {**cli_env, **site_env(wordpress, tmp_path, PRESSLOOP_WP_APP_PASSWORD=WRONG)}
    async with Serve(tmp_path, env) as server:
        shown = server.output()  # it answers /healthz: a warning, not a crash
    assert f"Warning, WordPress: {wordpress.url} did not sign in 'admin'" in shown, shown
    assert "401 rest_not_logged_in" in shown and SETTINGS in shown
    assert "Local WordPress" not in shown  # PRESSLOOP_WP_URL is set: no local site started


Pack = Callable[[str], Harness]


@pytest.fixture
async def pack(wordpress: LocalSite) -> AsyncIterator[Pack]:
    """`pack(password)`: every WordPress action, signed in as the admin with that password."""
    clients: list[WordPressClient] = []

    def build(password: str) -> Harness:
        client = WordPressClient(wordpress.url, wordpress.admin_user, password, max_retries=0)
        clients.append(client)
        ledger = MemoryLedger()
        services = ActionServices(wordpress=client)
        return Harness(
            client, ledger, Executor(Registry(WORDPRESS_ACTIONS), services, ledger=ledger)
        )

    yield build
    for client in clients:
        await client.aclose()


async def test_site_context_refuses_to_read_the_site_anonymously(
    pack: Pack, wordpress: LocalSite
) -> None:
    refused = await pack(WRONG).run("get_site_context")
    assert refused.status is StepStatus.FAILED, refused.content
    assert "WordPress answered 401 rest_not_logged_in" in refused.content
    assert SETTINGS in refused.content

    context = await pack(wordpress.app_password).ok("get_site_context")
    assert context["name"] == "Pressloop Local" and context["plugins"], context


async def test_an_action_refused_as_anonymous_names_the_settings(pack: Pack) -> None:
    # WordPress validates `status` before it checks who asks: a 400 "Status is forbidden.",
    # whose details say 401 (not signed in).
    refused = await pack(WRONG).run("list_posts", status="any")
    assert refused.status is StepStatus.FAILED, refused.content
    assert "400 rest_invalid_param" in refused.content
    assert "status: Status is forbidden." in refused.content
    assert SETTINGS in refused.content
