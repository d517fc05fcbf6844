"""Five-field cron schedules (minute hour day-of-month month day-of-week): when a key
rotation is next due. Pure; supports ``*``, ``a-b``, ``*/n``, ``a-b/n`` and lists, and the
classic rule that a day matches when either restricted day field matches.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Final

RANGES: Final = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
#: Search at most this far ahead; a schedule that never fires (Feb 30) is an error.
HORIZON_DAYS: Final = 5 * 366


class ScheduleError(ValueError):
    """The schedule is not a valid five-field cron expression."""


@dataclass(frozen=True)
class Schedule:
    """Allowed values of each field; ``dom_any``/``dow_any`` mark unrestricted day fields."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_any: bool
    dow_any: bool

    def day_matches(self, day: datetime) -> bool:
        """Cron's day rule: both restricted -> either matches; else the restricted one."""
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.dom_any or self.dow_any:
            return dom and dow
        return dom or dow


def _digits(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` also takes ``²``, which ``int`` refuses."""
    return text.isascii() and text.isdigit()


def _field(text: str, low: int, high: int) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        base, _, step_text = part.partition("/")
        step = int(step_text) if _digits(step_text) and int(step_text) > 0 else (
            1 if not step_text else -1)
        if step < 0:
            raise ScheduleError(f"bad step in {part!r}")
        if base == "*":
            start, stop = low, high
        else:
            first, _, last = base.partition("-")
            if not _digits(first) or (last and not _digits(last)):
                raise ScheduleError(f"bad field {part!r}")
            start, stop = int(first), int(last) if last else (high if step_text else int(first))
        if not low <= start <= stop <= high:
            raise ScheduleError(f"{part!r} is outside {low}-{high}")
        values.update(range(start, stop + 1, step))
    return frozenset(values)


def parse_schedule(text: str) -> Schedule:
    """Parse ``"m h dom mon dow"``."""
    fields = text.split()
    if len(fields) != 5:
        raise ScheduleError(f"{text!r}: a schedule has five fields (m h dom mon dow)")
    parsed = [_field(f, lo, hi) for f, (lo, hi) in zip(fields, RANGES, strict=True)]
    weekdays = frozenset(d % 7 for d in parsed[4])
    return Schedule(parsed[0], parsed[1], parsed[2], parsed[3], weekdays,
                    dom_any=fields[2].startswith("*"), dow_any=fields[4].startswith("*"))


def next_fire(schedule: Schedule, after: datetime) -> datetime:
    """The first minute strictly after ``after`` that the schedule names."""
    start = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    day = start.replace(hour=0, minute=0)
    for _ in range(HORIZON_DAYS):
        if schedule.day_matches(day):
            for hour in sorted(schedule.hours):
                for minute in sorted(schedule.minutes):
                    moment = day.replace(hour=hour, minute=minute)
                    if moment >= start:
                        return moment
        day += timedelta(days=1)
    raise ScheduleError("the schedule never fires")
