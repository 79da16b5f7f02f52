"""Usage (charts per day, per user and per site, beside the budgets) and the settings page."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from pressloop.api.auth import service_of
from pressloop.contracts import PolicyMode, Trigger
from pressloop.errors import PressloopError
from pressloop.policy import resolve_policy
from pressloop.runtime.service import Service
from pressloop.ui import charts
from pressloop.ui.render import page
from pressloop.ui.session import User

router = APIRouter()

DAYS = 14


@router.get("/ui/usage")
async def usage(request: Request, user: User) -> Response:
    service = service_of(request)
    settings = service.settings
    await service.flush_usage()  # the charts include the turns that just ran here
    rows = await service.usage(days=DAYS)
    days = charts.last_days(service.now().date(), DAYS)
    site = charts.daily(rows, "site")
    label = [day[5:] for day in days]  # MM-DD

    def series(key: str) -> list[tuple[str, int]]:
        return [(lbl, site.get(day, {}).get(key, 0)) for lbl, day in zip(label, days, strict=True)]

    site_charts = [
        charts.bar_chart(
            "Tokens per day (site)", series("tokens"), budget=settings.budget_site_tokens
        ),
        charts.bar_chart("Model calls per day (site)", series("model_calls")),
        charts.bar_chart(
            "Actions per day (site)", series("action_calls"), budget=settings.budget_site_actions
        ),
    ]
    today = days[-1]
    people = [row for row in rows if row["scope"] == "user" and row["day"] == today]
    return await page(
        request,
        "usage.html",
        user,
        "usage",
        site_charts=site_charts,
        people=people,
        rows=list(reversed(rows)),
        settings=settings,
        today=today,
    )


def _provider(service: Service) -> dict[str, str]:
    """The provider and model the next run will use, or why there is none."""
    try:
        provider = service.runner.provider()
    except PressloopError as problem:
        return {"name": "not configured", "model": "—", "problem": problem.message}
    return {"name": provider.name, "model": provider.model, "problem": ""}


@router.get("/ui/settings")
async def settings_page(request: Request, user: User) -> Response:
    service = service_of(request)
    agent = await service.default_agent()
    site = await service.site_settings()
    policies = {trigger: entry["policy"] for trigger, entry in site.policies.items()}
    defaults = {
        trigger.value: resolve_policy(trigger).model_dump(mode="json") for trigger in Trigger
    }
    overrides = agent.policy if agent else {}
    mcp = await service.list_mcp_servers()
    return await page(
        request,
        "settings.html",
        user,
        "settings",
        provider=_provider(service),
        policies=policies,
        overrides=overrides,
        defaults=defaults,
        modes=[m.value for m in PolicyMode],
        settings=service.settings,
        disabled_by_env=service.settings.disable_agent,
        disabled_by_setting=site.kill_switch.by_setting,
        mcp=mcp,
    )
