"""Bounded waits on a condition, failing early when a component has died.

Callers: controlplane.py. Polls with a short interval until the condition holds or the
deadline passes; never a fixed sleep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from .api import ApiUnavailableError
from .processes import Component

POLL_INTERVAL_S = 0.1


class ControlPlaneError(Exception):
    """The control plane could not start; the message names the component and its log."""


def _check_alive(components: Iterable[Component]) -> None:
    for component in components:
        if not component.alive():
            raise ControlPlaneError(
                f"{component.name} exited with {component.process.returncode}; "
                f"log {component.log}:\n{component.log_tail()}")


def _holds(condition: Callable[[], bool]) -> bool:
    try:
        return condition()
    except ApiUnavailableError:
        return False


def wait_until(condition: Callable[[], bool], *, what: str, timeout_s: float,
               watched: Iterable[Component]) -> None:
    """Return once ``condition()`` is true; raise ControlPlaneError after ``timeout_s``."""
    watched = tuple(watched)
    deadline = time.monotonic() + timeout_s
    while not _holds(condition):
        _check_alive(watched)
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(POLL_INTERVAL_S)
