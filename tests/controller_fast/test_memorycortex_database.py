"""DatabaseReady: the managed database's objects, credentials generated once, an external
database's Secret waited for; and a steady pass changes nothing."""

from __future__ import annotations

from attested_cortex.builders import names as n
from attested_cortex.controller.memorycortex.database import EXTERNAL_RETRY_S
from tests.controller_fast.conftest import Operated, cortex, database_runs

KIND = "MemoryCortex"


async def test_a_new_cortex_gets_its_database_and_waits_for_it(op: Operated) -> None:
    op.apply(cortex("mem"))
    assert await op.reconcile(KIND, "mem") is None  # the StatefulSet's change brings it back
    for api_version, kind, name in (("apps/v1", "StatefulSet", "mem-db"), ("v1", "Service",
                                    "mem-db"), ("networking.k8s.io/v1", "NetworkPolicy",
                                    "mem-db"), ("v1", "Secret", n.db_secret_name("mem"))):
        assert op.get(kind, name, api_version) is not None, kind
    assert op.reasons(KIND, "mem")["DatabaseReady"] == ("False", "DatabaseStarting")
    assert op.reasons(KIND, "mem")["Ready"] == ("False", "DatabaseStarting")
    assert op.condition(KIND, "mem", "DatabaseReady")["message"].startswith(
        "waiting for pod mem-db-0 to be ready")
    assert op.events(KIND, "mem") == [("Normal", "DatabaseStarting")]  # in progress: Normal

    database_runs(op)
    await op.reconcile(KIND, "mem")
    assert op.reasons(KIND, "mem")["DatabaseReady"] == ("True", "DatabaseRunning")
    assert op.status(KIND, "mem")["connectionSecret"] == n.db_secret_name("mem")


async def test_credentials_are_generated_once(op: Operated) -> None:
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    first = op.get("Secret", n.db_secret_name("mem"), "v1") or {}
    database_runs(op)
    for _ in range(3):
        await op.reconcile(KIND, "mem")
    again = op.get("Secret", n.db_secret_name("mem"), "v1") or {}
    assert again["data"] == first["data"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


async def test_an_external_database_waits_for_its_secret(op: Operated) -> None:
    op.apply(cortex("ext", database={"external": {"secretRef": {"name": "pg", "key": "uri"}}}))
    assert await op.reconcile(KIND, "ext") == EXTERNAL_RETRY_S  # user Secrets are not watched
    failed = op.condition(KIND, "ext", "DatabaseReady")
    assert (failed["status"], failed["reason"]) == ("False", "ConnectionSecretMissing")
    assert failed["message"] == ("Secret pg does not exist; create it with a postgresql:// URI")
    assert op.get("StatefulSet", "ext-db", "apps/v1") is None
    assert op.get("Secret", n.db_secret_name("ext"), "v1") is None
    assert op.events(KIND, "ext")[-1] == ("Warning", "ConnectionSecretMissing")

    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg"},
              "data": {"other": "eA=="}})
    await op.reconcile(KIND, "ext")
    assert "has no key 'uri'" in op.condition(KIND, "ext", "DatabaseReady")["message"]

    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pg"},
              "data": {"uri": "cG9zdGdyZXNxbDovL3g="}})
    await op.reconcile(KIND, "ext")
    assert op.reasons(KIND, "ext")["DatabaseReady"] == ("True", "ExternalDatabase")
    assert op.status(KIND, "ext")["connectionSecret"] == "pg"


async def test_a_steady_cortex_pass_changes_nothing(op: Operated) -> None:
    op.apply(cortex("mem"))
    await op.reconcile(KIND, "mem")
    changes, events = op.cluster.changes, op.events(KIND, "mem")
    await op.reconcile(KIND, "mem")  # its applies are answered "unchanged"
    assert op.cluster.changes == changes and op.events(KIND, "mem") == events
