"""Five-field cron schedules of key rotation: parsing, errors and the next firing time."""

from datetime import UTC, datetime

import pytest

from attested_cortex.builders.schedules import ScheduleError, next_fire, parse_schedule


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def fire(schedule: str, after: str) -> datetime:
    return next_fire(parse_schedule(schedule), at(after))


def test_fields() -> None:
    s = parse_schedule("0,30 */6 1-5 1-12/3 *")
    assert s.minutes == {0, 30}
    assert s.hours == {0, 6, 12, 18}
    assert s.days == {1, 2, 3, 4, 5}
    assert s.months == {1, 4, 7, 10}
    assert s.weekdays == set(range(7))
    assert not s.dom_any and s.dow_any


def test_lists_ranges_and_steps_combine() -> None:
    assert parse_schedule("1-10/3,50,55-57 * * * *").minutes == {1, 4, 7, 10, 50, 55, 56, 57}
    assert parse_schedule("10/20 * * * *").minutes == {10, 30, 50}


def test_sunday_is_zero_or_seven() -> None:
    assert parse_schedule("0 0 * * 7").weekdays == {0}
    assert parse_schedule("0 0 * * 5-7").weekdays == {5, 6, 0}


@pytest.mark.parametrize("text", [
    "", "* * * *", "* * * * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * 32 * *",
    "* * * 13 *", "* * * * 8", "*/0 * * * *", "*/x * * * *", "5-1 * * * *", "a * * * *",
    "1,,2 * * * *", "-1 * * * *", "MON * * * *", "1-2-3 * * * *",
])
def test_invalid_schedules(text: str) -> None:
    with pytest.raises(ScheduleError):
        parse_schedule(text)


def test_error_names_the_bad_part() -> None:
    with pytest.raises(ScheduleError, match="61"):
        parse_schedule("61 * * * *")
    with pytest.raises(ScheduleError, match="five fields"):
        parse_schedule("0 3 1 *")


def test_next_fire_is_strictly_after() -> None:
    assert fire("0 3 * * *", "2026-05-10T03:00:00") == at("2026-05-11T03:00:00")
    assert fire("0 3 * * *", "2026-05-10T02:59:59") == at("2026-05-10T03:00:00")
    assert fire("* * * * *", "2026-05-10T03:00:30") == at("2026-05-10T03:01:00")


def test_across_month_end() -> None:
    assert fire("0 3 1 * *", "2026-04-30T12:00:00") == at("2026-05-01T03:00:00")
    assert fire("0 0 31 * *", "2026-04-01T00:00:00") == at("2026-05-31T00:00:00")


def test_across_year_end() -> None:
    assert fire("30 23 31 12 *", "2026-12-31T23:30:00") == at("2027-12-31T23:30:00")
    assert fire("0 0 1 1 *", "2026-12-31T23:59:00") == at("2027-01-01T00:00:00")


def test_leap_day() -> None:
    assert fire("0 0 29 2 *", "2026-03-01T00:00:00") == at("2028-02-29T00:00:00")


def test_day_of_month_or_day_of_week_when_both_restricted() -> None:
    # 2026-06-01 is a Monday; "13th or Friday" fires on the first of either.
    assert fire("0 9 13 * 5", "2026-06-01T00:00:00") == at("2026-06-05T09:00:00")
    assert fire("0 9 13 * 5", "2026-06-12T10:00:00") == at("2026-06-13T09:00:00")


def test_only_the_restricted_day_field_counts() -> None:
    # Fridays only (day of month unrestricted), and the 13th only (weekday unrestricted).
    assert fire("0 9 * * 5", "2026-06-06T00:00:00") == at("2026-06-12T09:00:00")
    assert fire("0 9 13 * *", "2026-06-14T00:00:00") == at("2026-07-13T09:00:00")


def test_a_schedule_that_never_fires_is_an_error() -> None:
    with pytest.raises(ScheduleError, match="never fires"):
        fire("0 0 30 2 *", "2026-01-01T00:00:00")


def test_keeps_the_timezone() -> None:
    assert fire("0 3 * * *", "2026-05-10T04:00:00").tzinfo == UTC
