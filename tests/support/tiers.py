"""pytest plugin: a test's tier is what it needs, read from the fixtures it asks for.

Registered by tests/conftest.py. A test that asks, directly or through other fixtures, for a
fixture defined by one of the service plugins gets that service's marker:

* ``pg`` - any PostgreSQL server (tests.support.postgres, and everything built on it such as
  tests.support.cortex's migrated databases and served cortexes);
* ``kube`` - the local Kubernetes control plane (tests.support.kube);
* ``realnode`` - the real one-node cluster (tests.support.realnode).

So the tiers are selections, not folders: ``make test-fast`` runs ``-m "not pg and not kube and
not realnode"`` (pure builders, units, in-memory reconcilers, CLI parsing), and a test starting a
service by other means than these fixtures carries the marker itself. The hook runs first, so
the real-node plugin's skip sees the markers added here.
"""

from __future__ import annotations

import pytest

#: The plugin module that defines a fixture -> the marker of the service it starts.
SERVICE_OF_MODULE: dict[str, str] = {
    "tests.support.postgres": "pg",
    "tests.support.kube": "kube",
    "tests.support.realnode": "realnode",
}


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
