"""`pressloop doctor`'s lines about the MCP servers the agent uses: each one started as a turn
would start it, and what it offers (its tools by risk), or why it does not start."""

from __future__ import annotations

from collections import Counter

from pressloop.actions.registry import Registry
from pressloop.cli_checks import Check
from pressloop.config import Settings
from pressloop.runtime.mcp_tools import McpTools
from pressloop.store.db import Database, normalise_url


async def mcp_checks(settings: Settings) -> list[Check]:
    """One line per configured server (none when there is none); the configuration's own
    problems (a file that cannot be read, a stored server that is invalid) as failures."""
    # Wait for each start as long as a call may take: the doctor is there to see it finish.
    patient = settings.model_copy(
        update={"mcp_list_wait_s": settings.mcp_timeout_s + 5, "mcp_config_poll_s": 0}
    )
    database = Database.open(normalise_url(settings.resolved_database_url()))
    registry = Registry()
    tools = McpTools(patient, database, registry)
    try:
        notes = await tools.refresh()
        servers = dict(tools.connections)
    except Exception as exc:  # the database is reported by its own check
        return [Check(name="MCP servers", outcome="warn", detail=f"not checked: {exc}")]
    finally:
        await tools.aclose()
        await database.close()
    checks = []
    for name in sorted(servers):
        specs = [registry.get(n) for n in registry.names() if n.startswith(f"{name}.")]
        risks = Counter(spec.risk.value for spec in specs if spec is not None)
        problem = next((line for line in notes.splitlines() if f"'{name}'" in line), None)
        if problem is not None:
            checks.append(
                Check(
                    name=f"MCP server {name}",
                    outcome="fail",
                    detail=problem.removeprefix("- "),
                    hint="`pressloop mcp-servers list` shows its configuration",
                )
            )
            continue
        shown = ", ".join(f"{count} {risk}" for risk, count in sorted(risks.items()))
        detail = f"started; {len(specs)} tools ({shown or 'none'})"
        checks.append(Check(name=f"MCP server {name}", outcome="ok", detail=detail))
    for line in notes.splitlines():
        if not any(f"'{name}'" in line for name in servers):
            checks.append(Check(name="MCP servers", outcome="fail", detail=line.removeprefix("- ")))
    return checks
