"""A cloudNativePG cortex whose Cluster's Service names are taken is not given a Cluster:
CloudNativePG would take the Service over (cortex ``a-db-rw``'s API Service is cortex ``a``'s
read-write Service name)."""

from __future__ import annotations

from tests.controller_fast.conftest import Operated, cortex

KIND = "MemoryCortex"
CNPG = "postgresql.cnpg.io/v1"
HA = {"cloudNativePG": {"instances": 3, "storage": {"size": "1Gi"}}}


async def test_a_taken_service_name_keeps_the_cluster_from_being_made(op: Operated) -> None:
    op.apply(cortex("a-db-rw"))  # managed: its API Service is named a-db-rw
    await op.reconcile(KIND, "a-db-rw")
    assert op.get("Service", "a-db-rw", "v1") is not None

    op.apply(cortex("a", database=HA))
    assert await op.reconcile(KIND, "a") is not None  # looks again: nothing else wakes it
    failed = op.condition(KIND, "a", "DatabaseReady")
    assert (failed["status"], failed["reason"]) == ("False", "NameCollision")
    assert failed["message"].startswith("Service a-db-rw exists (controlled by MemoryCortex "
                                        "a-db-rw) and CloudNativePG would take it over")
    assert op.get("Cluster", "a-db", CNPG) is None
    assert op.get("Service", "a-db-rw", "v1")["metadata"]["ownerReferences"][0]["name"] \
        == "a-db-rw"  # left alone

    op.cluster.delete("v1", "Service", "ns", "a-db-rw")  # the other cortex's Service goes
    await op.reconcile(KIND, "a")
    assert op.get("Cluster", "a-db", CNPG) is not None
    assert op.reasons(KIND, "a")["DatabaseReady"][1] != "NameCollision"


async def test_the_clusters_own_services_are_no_collision(op: Operated) -> None:
    op.apply(cortex("b", database=HA))
    await op.reconcile(KIND, "b")
    cluster = op.get("Cluster", "b-db", CNPG)
    assert cluster is not None
    ref = {"apiVersion": CNPG, "kind": "Cluster", "name": "b-db",
           "uid": cluster["metadata"]["uid"], "controller": True}
    op.apply({"apiVersion": "v1", "kind": "Service",  # as CloudNativePG makes it
              "metadata": {"name": "b-db-rw", "ownerReferences": [ref]}, "spec": {}})
    await op.reconcile(KIND, "b")
    assert op.reasons(KIND, "b")["DatabaseReady"][1] != "NameCollision"
