"""`pressloop doctor`: what is set up and what is not, each with a hint to fix it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from sqlalchemy.engine import make_url

from pressloop.cli_check_provider import provider_check
from pressloop.cli_checks import Check, Outcome, show, site_credentials
from pressloop.cli_mcp_check import mcp_checks
from pressloop.config import Settings
from pressloop.errors import ConfigurationError
from pressloop.runtime.context import KILL_SWITCH_SETTING
from pressloop.store import migrate, settings_repo
from pressloop.store.db import Database, normalise_url, ping

DB_TIMEOUT_S = 10.0


async def run_checks(console: Console) -> int:
    try:
        settings = Settings()
    except ValidationError as exc:
        show(console, Check(name="configuration", outcome="fail", detail=str(exc)))
        return 1
    checks = [
        Check(
            name="configuration",
            outcome="ok",
            detail=f"loaded (data directory {settings.data_dir.resolve()})",
        )
    ]
    database_checks, agent_disabled = await _database(settings)
    checks += database_checks
    checks.append(await _provider(settings))
    checks.append(await _local_model(settings))
    checks.append(_kill_switch(settings, agent_disabled))
    checks.append(await site_credentials(settings))
    if all(check.outcome == "ok" for check in database_checks):  # the servers it stores too
        checks += await mcp_checks(settings)
    for check in checks:
        show(console, check)
    return 1 if any(c.outcome == "fail" for c in checks) else 0


async def _database(settings: Settings) -> tuple[list[Check], bool]:
    url = normalise_url(settings.resolved_database_url())
    parsed = make_url(url)
    shown = parsed.render_as_string(hide_password=True)
    if _missing_sqlite_file(parsed.drivername, parsed.database):
        return [
            Check(
                name="database",
                outcome="fail",
                detail=f"{shown} does not exist yet",
                hint="`pressloop db upgrade` (or `pressloop serve`) creates it",
            )
        ], False
    database = Database.open(url)
    try:
        async with asyncio.timeout(DB_TIMEOUT_S):
            async with database.read() as conn:
                await ping(conn)
            current = await migrate.current_revision(database)
            head = migrate.head_revision()
            disabled = False
            if current == head:
                async with database.read() as conn:
                    disabled = bool(await settings_repo.get_setting(conn, KILL_SWITCH_SETTING))
    except Exception as exc:  # any failure to connect is reported, not raised
        return [
            Check(
                name="database",
                outcome="fail",
                detail=f"{shown} is not reachable: {type(exc).__name__}: {exc}".strip(),
                hint="check PRESSLOOP_DATABASE_URL and that the database server is running",
            )
        ], False
    finally:
        await database.close()
    reachable = Check(name="database", outcome="ok", detail=f"{shown} answers")
    if current == head:
        return [
            reachable,
            Check(name="schema", outcome="ok", detail=f"at revision {head}"),
        ], disabled
    migrated = Check(
        name="schema",
        outcome="fail",
        detail=f"at revision {current or 'none'}; this version needs {head}",
        hint="run `pressloop db upgrade`",
    )
    return [reachable, migrated], disabled


def _missing_sqlite_file(driver: str, database: str | None) -> bool:
    if not driver.startswith("sqlite") or database in (None, "", ":memory:"):
        return False
    return not Path(database or "").exists()


async def _provider(settings: Settings) -> Check:
    from pressloop.providers.factory import build_provider

    try:
        provider = build_provider(settings)
    except ConfigurationError as exc:
        return Check(name="model provider", outcome="fail", detail=exc.message)
    close = getattr(provider, "aclose", None)
    if close is not None:
        await close()
    return await provider_check(settings, label=f"{provider.name}, model {provider.model}")


async def _local_model(settings: Settings) -> Check:
    """The offline model: llama.cpp built, the file present, its sha256, how long it loads."""
    from pressloop.providers.local.model_file import ModelPlace
    from pressloop.providers.local.model_file.state import local_model_state

    in_use = settings.provider == "local"
    state = await asyncio.to_thread(local_model_state, ModelPlace.from_settings(settings))
    parts = [f"built ({state.runtime})" if state.runtime else "not built"]
    if not state.present:
        parts.append(f"no file at {state.path}" + (" (cached)" if state.cached else ""))
    else:
        parts.append(f"file {state.path}")
        parts.append(
            {True: "hash ok", False: "HASH MISMATCH", None: "hash not checked"}[state.hash_ok]
        )
    if state.ready:
        seconds, backend, saved = await _load_and_prompt_state(settings)
        parts += [f"loads in {seconds:.1f} s", backend, saved.detail]
        outcome: Outcome = "warn" if saved.missing and in_use else "ok"
        return Check(name="local model", outcome=outcome, detail=", ".join(parts), hint=saved.hint)
    hint = state.problem or (
        "`make run` builds it (`uv sync --group local`) and prepares the model"
        if not state.runtime
        else "`make run` or `python -m pressloop.local_model prepare` prepares the model"
    )
    outcome = "fail" if in_use or state.hash_ok is False else "info"
    return Check(name="local model", outcome=outcome, detail=", ".join(parts), hint=hint)


@dataclass(kw_only=True, frozen=True)
class SavedState:
    detail: str
    missing: bool = False
    hint: str = ""


async def _load_and_prompt_state(settings: Settings) -> tuple[float, str, SavedState]:
    """How long the model loads (in its own process, as the service runs it), which CPU
    variant of llama.cpp that process chose, and whether the system prompt's saved state for
    the current catalog is there and was written for this machine (without it the first
    answer after a start reads the whole prompt)."""
    from pressloop.local_model.prompt import default_system_prompt
    from pressloop.providers.local import build_local_provider

    provider = build_local_provider(settings)
    try:
        seconds = await provider.load()
        info = await provider.info()
        found = await provider.prompt_state(default_system_prompt(settings.action_packs))
    finally:
        await provider.aclose()
    backend = info.get("backend") or {}
    offered = backend.get("offered") or {}
    runnable = sum(1 for score in offered.values() if score)
    # A variant that scored higher but died in its test decision here (backends.py, probe).
    passed = "".join(
        f"; {name} passed over: {why}" for name, why in (backend.get("passed_over") or {}).items()
    )
    variant = (
        f"llama.cpp CPU variant {backend.get('variant')} (best of {runnable} this CPU runs, "
        f"{len(offered)} built{passed})"
        if offered
        else "llama.cpp CPU backend built in (no variants)"
    )
    tokens = int(found.get("tokens") or 0)
    if found.get("path") is None:
        return (
            seconds,
            variant,
            SavedState(detail="saved prompt state off (PRESSLOOP_LOCAL_KEEP_PREFIX)"),
        )
    if found.get("present"):
        return (
            seconds,
            variant,
            SavedState(
                detail=f"saved prompt state for the current catalog ({tokens:,} tokens), "
                f"matches this machine (llama-cpp-python {backend.get('llama_cpp_version')}, "
                f"{backend.get('variant')})"
            ),
        )
    prepare_hint = (
        f"the first answer after a start reads the {tokens:,}-token system prompt first (tens "
        "of seconds on 2 cores); `python -m pressloop.local_model prepare` saves it"
    )
    if found.get("stale"):
        return (
            seconds,
            variant,
            SavedState(
                detail=f"saved prompt state does not match this machine: {found['stale']}",
                missing=True,
                hint=f"it will not be loaded; {prepare_hint} again",
            ),
        )
    return (
        seconds,
        variant,
        SavedState(
            detail="no saved prompt state for the current catalog", missing=True, hint=prepare_hint
        ),
    )


def _kill_switch(settings: Settings, disabled_in_database: bool) -> Check:
    if settings.disable_agent or disabled_in_database:
        where = (
            "PRESSLOOP_DISABLE_AGENT" if settings.disable_agent else "the agent_disabled setting"
        )
        return Check(
            name="kill switch",
            outcome="warn",
            detail=f"ON ({where}): no new turn runs",
            hint="unset it to let the agent run again",
        )
    return Check(name="kill switch", outcome="ok", detail="off: the agent may run")
