"""When heartbeats are due: interval or cron, in a timezone, within active hours. Pure functions."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from pressloop.errors import InvalidRequest
from pressloop.store.schedules import ScheduleRecord


@dataclass(kw_only=True, frozen=True)
class BeatRule:
    kind: str  # "interval" | "cron"
    interval_s: int | None = None
    cron: str | None = None
    timezone: str = "UTC"
    active_hours: tuple[time, time] | None = None  # local [start, end); may wrap midnight

    def zone(self) -> ZoneInfo:
        try:
            return ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise InvalidRequest(f"unknown timezone {self.timezone!r}") from exc


def parse_active_hours(value: dict[str, str] | None) -> tuple[time, time] | None:
    if not value:
        return None
    try:
        return time.fromisoformat(value["start"]), time.fromisoformat(value["end"])
    except (KeyError, ValueError) as exc:
        raise InvalidRequest(
            'active_hours must look like {"start": "08:00", "end": "22:00"}'
        ) from exc


def validate(rule: BeatRule) -> None:
    rule.zone()
    if rule.kind == "interval":
        if not rule.interval_s or rule.interval_s < 1:
            raise InvalidRequest("an interval schedule needs interval_s >= 1")
    elif rule.kind == "cron":
        if not rule.cron or not croniter.is_valid(rule.cron):
            raise InvalidRequest(f"invalid cron expression {rule.cron!r}")
    else:
        raise InvalidRequest("kind must be 'interval' or 'cron'")


def next_due(rule: BeatRule, *, after: datetime, anchor: datetime | None = None) -> datetime:
    """The first due time strictly after `after`. Interval beats keep the phase of `anchor`, so
    missed beats collapse into one catch-up instead of a flood."""
    if rule.kind == "interval":
        assert rule.interval_s is not None
        start = anchor or after
        if start > after:
            return start
        steps = math.floor((after - start).total_seconds() / rule.interval_s) + 1
        return start + timedelta(seconds=steps * rule.interval_s)
    assert rule.cron is not None
    local = after.astimezone(rule.zone())
    found: datetime = croniter(rule.cron, local).get_next(datetime)
    return found.astimezone(after.tzinfo)


def in_active_hours(rule: BeatRule, when: datetime) -> bool:
    if rule.active_hours is None:
        return True
    start, end = rule.active_hours
    local = when.astimezone(rule.zone()).time()
    if start <= end:
        return start <= local < end
    return local >= start or local < end  # wraps midnight, e.g. 22:00-06:00


def rule_of(schedule: ScheduleRecord) -> BeatRule:
    return BeatRule(
        kind=schedule.kind,
        interval_s=schedule.interval_s,
        cron=schedule.cron,
        timezone=schedule.timezone,
        active_hours=parse_active_hours(schedule.active_hours),
    )
