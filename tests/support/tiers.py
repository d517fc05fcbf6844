"""pytest plugin: a test's tier is what it needs, read from the fixtures it asks for.

Registered by tests/conftest.py. A test that asks, directly or through other fixtures, for a
fixture defined by one of the service plugins gets that service's marker:

* ``pg`` - any PostgreSQL server (tests.support.postgres, and everything built on it such as
  tests.support.cortex's migrated databases and served cortexes);
* ``kube`` - the local Kubernetes control plane (tests.support.kube);
* ``realnode`` - the real one-node cluster (tests.support.realnode).

So the tiers are selections, not folders: ``make test-fast`` runs ``-m "not pg and not age and
not kube and not realnode and not tools and not spawns"`` (pure builders, units, in-memory
reconcilers, CLI parsing: under 60 s), and a test starting a service by other means than these
fixtures carries the marker itself (tests/server/test_failover.py runs its own PostgreSQL: ``pg``).
A test that starts processes of its own (cortexctl, a pytest run, hook executables, worker
processes) is marked ``spawns`` by hand: it needs no service but costs seconds of process
start-up, so it runs in ``make test-local`` and ``make test``, not the fast tier. The hook runs
first, so the real-node plugin's skip sees the markers added here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

#: The plugin module that defines a fixture -> the marker of the service it starts.
SERVICE_OF_MODULE: dict[str, str] = {
    "tests.support.postgres": "pg",
    "tests.support.kube": "kube",
    "tests.support.realnode": "realnode",
}


#: A test carrying none of these is in the fast tier, and may start no process.
TIER_MARKERS = ("pg", "age", "kube", "realnode", "tools", "spawns")


def services_needed(item: pytest.Item) -> set[str]:
    """The markers of the services whose fixtures are in the test's fixture closure."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    return {SERVICE_OF_MODULE[module]
            for definitions in info.name2fixturedefs.values()
            for definition in definitions
            if (module := getattr(definition.func, "__module__", "")) in SERVICE_OF_MODULE}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for marker in sorted(services_needed(item)):
            if not item.get_closest_marker(marker):
                item.add_marker(marker)


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest,
                                 monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Keeps the fast tier honest: a test with no tier marker that starts a process (a
    subprocess, asyncio's, a hook executable: all go through ``subprocess.Popen``) fails,
    naming the first command, until it is marked ``spawns`` (or the service it starts)."""
    if any(request.node.get_closest_marker(marker) for marker in TIER_MARKERS):
        yield
        return
    started: list[str] = []
    original = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def recorded(self: subprocess.Popen[Any], args: Any, *rest: Any, **options: Any) -> Any:
        started.append(str(args)[:120])
        return original(self, args, *rest, **options)

    monkeypatch.setattr(subprocess.Popen, "_execute_child", recorded)
    yield
    if started:
        pytest.fail(f"a fast-tier test started {len(started)} process(es), first {started[0]}: "
                    "mark it spawns (tests/support/tiers.py)", pytrace=False)
