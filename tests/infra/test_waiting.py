"""The suite's one bounded wait (hack/support/waiting.py), and that it stays the only one.

Issue 22 (item 7) found seven poll helpers and a dozen hand-written deadline loops, each with
its own bound, interval and failure message (some said only "condition not reached"). They
are now ``wait_until``/``await_until``; the last test here fails when a new hand-written
deadline loop appears under tests/ or e2e/.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from hack.support.waiting import Pending, WaitTimeout, await_until, wait_until

ROOT = Path(__file__).resolve().parents[2]

#: A deadline computed by hand, or a timeout block that sleeps between polls: the two shapes
#: of a hand-written bounded wait.
HAND_WRITTEN = re.compile(r"(monotonic|\.time)\(\)\s*\+"
                          r"|asyncio\.timeout\([^\n]*\):(\n[^\n]*){1,6}?[^\n]*asyncio\.sleep\(")

#: Deadline loops that are not waits on a condition, and why.
NOT_A_WAIT = {
    "hack/support/waiting.py": "the one bounded wait itself",
    "tests/operator/test_manners.py": "a measurement window in which nothing may happen",
    "tests/cli/test_make_serve.py": "reads a process's output line by line up to a marker",
    "tests/kube/test_lifecycle.py": "reads a process's output from a queue up to a marker",
}


def test_the_first_truthy_value_is_returned_once_it_appears() -> None:
    answers = iter([None, 0, "", "up"])
    assert wait_until(lambda: next(answers), what="the answer", seconds=5, interval_s=0) == "up"


def test_a_condition_that_never_holds_fails_naming_what_and_the_last_value() -> None:
    seen = iter(range(1_000_000))
    with pytest.raises(WaitTimeout) as failed:
        wait_until(lambda: next(seen) < 0, what="a negative count", seconds=0.2)
    expected = "timed out after 0.2s waiting for a negative count; last seen: False"
    assert str(failed.value) == expected


def test_without_a_name_the_condition_is_named_by_its_source_and_pending_shows_what_it_saw(
) -> None:
    with pytest.raises(WaitTimeout) as failed:
        wait_until(lambda: Pending({"queued": 3}), seconds=0.1)
    message = str(failed.value)
    assert "waiting for wait_until(lambda: Pending({\"queued\": 3})" in message
    assert message.endswith("last seen: {'queued': 3}")


def test_listed_exceptions_mean_not_yet_and_others_end_the_wait_at_once() -> None:
    attempts: list[int] = []

    def connect() -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise ConnectionRefusedError("refused")
        return "connected"

    assert wait_until(connect, seconds=5, interval_s=0, ignoring=(OSError,)) == "connected"
    attempts.clear()
    with pytest.raises(WaitTimeout, match=r"last seen: ConnectionRefusedError\('refused'\)"):
        wait_until(connect, seconds=0, ignoring=(OSError,))
    with pytest.raises(KeyError):  # a broken probe is the test's failure, not a slow condition
        wait_until(lambda: dict[str, int]()["missing"], seconds=60, ignoring=(OSError,))


async def test_the_async_form_awaits_coroutine_probes_and_accepts_plain_ones() -> None:
    ready = asyncio.Event()

    async def is_set() -> bool:
        return ready.is_set()

    asyncio.get_running_loop().call_soon(ready.set)
    assert await await_until(is_set, what="the event", seconds=5) is True
    assert await await_until(lambda: ready.is_set() and "set", seconds=5) == "set"
    with pytest.raises(WaitTimeout, match="waiting for the event cleared; last seen: False"):
        await await_until(lambda: not ready.is_set(), what="the event cleared", seconds=0.1)


def test_no_hand_written_deadline_loop_is_left_in_the_suite() -> None:
    found = []
    for path in sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "e2e").rglob("*.py"),
                         *(ROOT / "hack" / "support").rglob("*.py")]):
        relative = path.relative_to(ROOT).as_posix()
        if relative in NOT_A_WAIT:
            continue
        for match in HAND_WRITTEN.finditer(path.read_text()):
            line = path.read_text().count("\n", 0, match.start()) + 1
            found.append(f"{relative}:{line}")
    assert found == [], "use hack.support.waiting.wait_until/await_until instead"
