"""Bar charts drawn on the server as SVG geometry: no chart library, no script, readable offline."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

WIDTH = 640
HEIGHT = 160
GAP = 4


@dataclass(frozen=True)
class Bar:
    label: str
    value: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class Chart:
    title: str
    bars: list[Bar]
    peak: int
    budget: int | None
    budget_y: float | None
    width: int = WIDTH
    height: int = HEIGHT


def bar_chart(title: str, points: Sequence[tuple[str, int]], *, budget: int | None = None) -> Chart:
    """Bars scaled to the larger of the peak and the budget, so the budget line fits too."""
    peak = max((value for _, value in points), default=0)
    top = max(peak, budget or 0, 1)
    step = WIDTH / max(len(points), 1)
    bars = [
        Bar(
            label=label,
            value=value,
            x=index * step + GAP / 2,
            y=HEIGHT - value / top * HEIGHT,
            width=max(step - GAP, 1),
            height=value / top * HEIGHT,
        )
        for index, (label, value) in enumerate(points)
    ]
    budget_y = HEIGHT - budget / top * HEIGHT if budget else None
    return Chart(title=title, bars=bars, peak=peak, budget=budget or None, budget_y=budget_y)


def last_days(today: date, days: int) -> list[str]:
    return [(today - timedelta(days=offset)).isoformat() for offset in range(days - 1, -1, -1)]


def daily(rows: Iterable[Mapping[str, Any]], scope: str) -> dict[str, dict[str, int]]:
    """Usage rows summed per day for one scope: {day: {tokens, model_calls, action_calls, ...}}."""
    per_day: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        if row["scope"] != scope:
            continue
        day = per_day[row["day"]]
        day["tokens"] += int(row["input_tokens"]) + int(row["output_tokens"])
        for key in ("model_calls", "action_calls", "runs", "refusals"):
            day[key] += int(row.get(key) or 0)
    return per_day
