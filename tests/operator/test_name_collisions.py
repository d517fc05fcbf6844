"""Two cortexes whose generated names meet (cortex ``col``'s database Service is cortex
``col-db``'s API Service): the object stays with the cortex that holds it, the other one
says so in Ready, and takes the name when it frees (issue 21, item 1)."""

from __future__ import annotations

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Object, Operated, OperatorProcess, cortex

pytestmark = pytest.mark.kube


def _service(operated: Operated, name: str) -> Object | None:
    return operated.get("service", name)


def _held_by(operated: Operated, name: str, owner: str) -> Object | None:
    service = _service(operated, name)
    refs = (service or {}).get("metadata", {}).get("ownerReferences") or [{}]
    return service if refs[0].get("name") == owner else None


def test_a_service_another_cortex_controls_is_never_taken(operated: Operated,
                                                         operator: OperatorProcess) -> None:
    operated.apply(cortex("col"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/col", "--timeout=120s")
    operated.apply(cortex("col-db"))
    refused = operated.wait_condition("MemoryCortex", "col-db", "Ready", "False",
                                      reason="NameCollision")
    assert "Service col-db" in refused["message"] and "MemoryCortex col," in refused["message"]
    held = _held_by(operated, "col-db", "col")
    assert held is not None, _service(operated, "col-db")
    assert [p["port"] for p in held["spec"]["ports"]] == [5432]
    assert held["spec"]["selector"]["app.kubernetes.io/instance"] == "col"
    assert operated.condition("MemoryCortex", "col", "Ready")["status"] == "True"

    # The name frees: the waiting cortex takes it without any unrelated event.
    operated.kubectl("delete", "mcx/col", "--wait=true")
    taken = wait_until(lambda: _held_by(operated, "col-db", "col-db"), what="col-db's API Service",
                       seconds=90, interval_s=0.2)
    assert [p["port"] for p in taken["spec"]["ports"]] == [8080]

    # The other way round: the cortex that lost its database Service is not Ready.
    operated.apply(cortex("col"))
    lost = operated.wait_condition("MemoryCortex", "col", "Ready", "False",
                                   reason="NameCollision")
    assert "controlled by MemoryCortex col-db" in lost["message"]
    assert _held_by(operated, "col-db", "col-db") is not None
    operated.kubectl("delete", "mcx/col-db", "--wait=true")
    back = wait_until(lambda: _held_by(operated, "col-db", "col"),
                      what="col's database Service back", seconds=90, interval_s=0.2)
    assert [p["port"] for p in back["spec"]["ports"]] == [5432]
    operated.wait_condition("MemoryCortex", "col", "Ready", "True", seconds=120)


def test_a_cortex_recreated_at_once_takes_its_children_back(operated: Operated,
                                                            operator: OperatorProcess) -> None:
    """The children of the deleted cortex (same name, another uid) are not adopted while
    they wait for garbage collection; the new cortex gets its own and becomes Ready."""
    operated.apply(cortex("again"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/again", "--timeout=120s")
    operated.kubectl("delete", "mcx/again", "--wait=false")
    operated.apply(cortex("again"))
    uid = wait_until(lambda: (operated.get("MemoryCortex", "again") or {}).get(
        "metadata", {}).get("uid"), what="the new cortex", seconds=60, interval_s=0.2)
    operated.wait_condition("MemoryCortex", "again", "Ready", "True", seconds=150)
    for kind, name in (("service", "again"), ("service", "again-db"),
                       ("statefulset", "again-db"), ("configmap", "again-config")):
        owner = wait_until(lambda k=kind, m=name: (
            ref := ((operated.get(k, m) or {}).get("metadata", {}).get("ownerReferences")
                    or [{}])[0]).get("uid") == uid and ref,
                           what=f"{kind}/{name} owned by the new cortex", seconds=60,
                           interval_s=0.2)
        assert owner["name"] == "again"
