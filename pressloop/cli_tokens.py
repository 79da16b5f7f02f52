"""`pressloop token ...`: create (optionally expiring), list and revoke API tokens.

The token itself is printed once, on standard output, when it is created; `list` shows each
token's life (created, expires, last used, revoked), never the token or its hash.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from pressloop.cli_common import console, errors, opened, run_command
from pressloop.cli_render import when

if TYPE_CHECKING:
    from pressloop.runtime.access import Access
    from pressloop.runtime.service import Service
    from pressloop.store.tokens import AccessToken

token_app = typer.Typer(no_args_is_help=True, help="API tokens: create, list, revoke.")


class TokenRole(StrEnum):
    ADMIN = "admin"
    OPERATOR = "operator"
    VIEWER = "viewer"


def access(service: Service) -> Access:
    from pressloop.runtime.access import Access

    return Access(database=service.database, settings=service.settings, now=service.now)


def state(token: AccessToken, now: datetime) -> str:
    if token.revoked_at is not None:
        return "[red]revoked[/]"
    return "active" if token.live(now) else "[yellow]expired[/]"


def tokens_table(tokens: list[AccessToken], now: datetime) -> Table:
    table = Table("id", "name", "role", "status", "created", "expires", "last used", "revoked")
    for t in tokens:
        table.add_row(
            t.id,
            escape(t.name),
            t.role,
            state(t, now),
            when(t.created_at),
            when(t.expires_at) if t.expires_at else "never",
            when(t.last_used_at) if t.last_used_at else "never",
            when(t.revoked_at),
        )
    return table


@token_app.command("create")
def token_create(
    role: Annotated[TokenRole, typer.Option(help="What the token may do.")],
    name: Annotated[str | None, typer.Option(help="Who uses it (recorded on runs).")] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(help="How long it lives: 30d, 12h, 90m, 1d12h (default: until revoked)."),
    ] = None,
) -> None:
    """Create an API token and print it (only this once) on standard output."""
    from pressloop.runtime.access import parse_duration

    async def create() -> int:
        lifetime = parse_duration(expires_in) if expires_in else None
        async with opened() as service:
            record, token = await access(service).create_token(
                name=name or f"{role.value}-token", role=role.value, expires_in=lifetime
            )
        until = f", expires {when(record.expires_at)} UTC" if record.expires_at else ""
        errors.print(
            f"created {record.role} token {escape(repr(record.name))} ({record.id}{until})",
            soft_wrap=True,
        )
        print(token)
        return 0

    run_command(create())


@token_app.command("list")
def token_list() -> None:
    """Every token: role, status, created, expires, last used, revoked."""

    async def show() -> int:
        async with opened() as service:
            tokens = await access(service).list_tokens()
            console.print(tokens_table(tokens, service.now()))
        return 0

    run_command(show())


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok_...).")],
) -> None:
    """Revoke a token: refused at once, and every UI session signed in with it ends."""

    async def revoke() -> int:
        async with opened() as service:
            token = await access(service).revoke_token(token_id)
        console.print(
            f"token {token.id} ({escape(token.name)}) revoked at {when(token.revoked_at)} UTC",
            soft_wrap=True,
            highlight=False,
        )
        return 0

    run_command(revoke())
