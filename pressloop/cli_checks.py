"""Checks `pressloop doctor` prints (and `pressloop serve` runs at start): what they found, and
the check of the WordPress site's credentials, which signs in for real.

WordPress reads a call with a wrong Application Password as an anonymous visitor's: public
routes answer it, so only a call that needs a signed-in user tells. `GET /wp/v2/users/me` with
`context=edit` is that call, and its answer names the user and its roles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console
from rich.markup import escape

from pressloop.actions.wordpress.client import WordPressClient
from pressloop.config import Settings
from pressloop.errors import ActionError, ConfigurationError, SiteError

Outcome = Literal["ok", "fail", "warn", "info"]
STYLE = {"ok": "green", "fail": "bold red", "warn": "yellow", "info": "blue"}

# What lets a user run the site's actions: an administrator's or an editor's capability.
MANAGING_ROLES = ("administrator", "editor")
MANAGING_CAPABILITIES = ("manage_options", "edit_others_posts")
CREDENTIALS_HINT = (
    "set PRESSLOOP_WP_USER to the user's login and PRESSLOOP_WP_APP_PASSWORD to one of its "
    "Application Passwords (Users > Profile > Application Passwords; not the login password); "
    "if both are right, the web server may be dropping the Authorization header"
)


@dataclass(kw_only=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    hint: str = ""


def show(console: Console, check: Check) -> None:
    mark = f"[{STYLE[check.outcome]}]{check.outcome:>4}[/]"
    console.print(f"{mark}  [bold]{check.name}[/]: {escape(check.detail)}", soft_wrap=True)
    if check.hint:
        console.print(f"      hint: {escape(check.hint)}", soft_wrap=True, style="dim")


async def site_credentials(settings: Settings) -> Check:
    """Sign in to PRESSLOOP_WP_URL as PRESSLOOP_WP_USER: who that is and whether it may manage
    the site, or what WordPress answered and which settings to fix."""
    try:
        client = WordPressClient.from_settings(
            settings, timeout_s=settings.check_timeout_s, max_retries=0
        )
    except ConfigurationError:
        return _not_configured(settings)
    async with client:
        try:
            me = await client.whoami()
        except SiteError as problem:
            if problem.status in (401, 403):
                return Check(
                    name="wordpress",
                    outcome="fail",
                    detail=f"{client.base_url} did not sign in {client.user!r}: {problem.message}",
                    hint=CREDENTIALS_HINT,
                )
            return Check(
                name="wordpress",
                outcome="fail",
                detail=problem.message,
                hint="set PRESSLOOP_WP_URL to the site's address (where /wp-json/ answers)",
            )
        except ActionError as problem:  # no answer: the address, the network, the server
            return Check(
                name="wordpress",
                outcome="fail",
                detail=problem.message,
                hint="check PRESSLOOP_WP_URL and that the site is up",
            )
    return _signed_in(client.base_url, client.user, me)


def _signed_in(url: str, user: str, me: dict[str, Any]) -> Check:
    roles = [str(role) for role in me.get("roles") or []]
    capabilities = me.get("capabilities")
    allowed = capabilities if isinstance(capabilities, dict) else {}
    who = f"{url} as {me.get('username') or user} (roles: {', '.join(roles) or 'none'})"
    if set(roles) & set(MANAGING_ROLES) or any(allowed.get(c) for c in MANAGING_CAPABILITIES):
        return Check(name="wordpress", outcome="ok", detail=who)
    return Check(
        name="wordpress",
        outcome="warn",
        detail=f"{who} cannot manage the site (no administrator or editor capability)",
        hint=f"most actions will be refused: give {user!r} the Administrator (or Editor) role, or "
        "set PRESSLOOP_WP_USER and PRESSLOOP_WP_APP_PASSWORD to a user who has it",
    )


def _not_configured(settings: Settings) -> Check:
    present = {
        "PRESSLOOP_WP_URL": settings.wp_url,
        "PRESSLOOP_WP_USER": settings.wp_user,
        "PRESSLOOP_WP_APP_PASSWORD": settings.wp_app_password,
    }
    missing = [name for name, value in present.items() if not value]
    return Check(
        name="wordpress",
        outcome="info",
        detail="not configured; the site actions are not available",
        hint=f"set {', '.join(missing)} (an Application Password) to act on a site",
    )
