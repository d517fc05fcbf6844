"""Health as GitOps tools read it (ADR 0046): Flux's kstatus (cli-utils' pkg/kstatus, built
into hack/kstatus) and the Argo CD health check we ship (charts/attested-cortex/files/
argocd-health.lua, run by Debian's lua5.4) both read each of our four kinds as on its way
while it reconciles, done once Ready and failed once it stalls.

Real objects on the real control plane, driven by the real operator (kwok runs the pods and
completes the Jobs): satellites made before their cortex wait for it, a cortex whose
database Secret is not there yet waits for it, then all become Ready; a cortex asking for a
schema this build does not know stalls. A failed migration and a rollout in progress cannot
be had from kwok (its Jobs complete, its pods are available at once): those statuses are the
ones the operator's own passes write on a failed Job and a Deployment still rolling
(tests/controller_fast's in-memory cluster, the same reconcile code).
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from attested_cortex.builders import names as n
from tests.controller_fast.conftest import Operated as FastOperated
from tests.controller_fast.conftest import cortex as fast_cortex
from tests.controller_fast.conftest import database_runs, job_finished, server_rolled
from tests.gitops.conftest import CHART
from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

#: helm, kstatus and promtool are binaries built by `make deps`: not in `make test-fast`.
pytestmark = pytest.mark.tools

HEALTH_LUA = CHART / "files" / "argocd-health.lua"
KINDS = ("MemoryCortex", "PermissionRule", "HookChain", "AgentIdentity", "CortexSubscription")
#: kstatus -> what Argo CD must say for the same object.
ARGO = {"InProgress": "Progressing", "Current": "Healthy", "Failed": "Degraded"}


def kstatus_of(binary: Path, body: dict[str, Any]) -> str:
    answer = subprocess.run([str(binary)], input=json.dumps(body), capture_output=True,
                            text=True, timeout=30, check=True)
    return str(json.loads(answer.stdout)["status"])


def lua_table(value: Any) -> str:
    """``value`` (decoded JSON) as a Lua table constructor, as Argo CD hands ``obj`` over."""
    if isinstance(value, dict):
        return "{" + ",".join(f"[{json.dumps(str(k))}]={lua_table(v)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "{" + ",".join(lua_table(v) for v in value) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nil"
    return json.dumps(value)


def argo_of(lua: str, body: dict[str, Any]) -> str:
    program = (f"obj = {lua_table(body)}\n"
               f"local hs = dofile({json.dumps(str(HEALTH_LUA))})\n"
               "io.write(hs.status, '\\t', hs.message or '')\n")
    answer = subprocess.run([lua, "-"], input=program, capture_output=True, text=True,
                            timeout=30, check=True)
    return answer.stdout.split("\t", 1)[0]


def read_as(kstatus: Path, lua: str, body: dict[str, Any], expected: str) -> None:
    """Both tools read ``body`` as ``expected`` (kstatus' name)."""
    name = f"{body['kind']}/{body['metadata']['name']}"
    conditions = (body.get("status") or {}).get("conditions")
    assert kstatus_of(kstatus, body) == expected, (name, conditions)
    assert argo_of(lua, body) == ARGO[expected], (name, conditions)


@pytest.mark.kube
def test_every_kind_reads_in_progress_then_current_and_stalled_reads_failed(
        operated: Operated, operator: OperatorProcess, kstatus: Path, lua: str) -> None:
    operated.kubectl("create", "serviceaccount", "ks-agent")
    satellites = [
        satellite("PermissionRule", "ks-rule", "ks", namespace="team/**", agents=["*"],
                  operations=["store"], decision="Allow"),
        satellite("HookChain", "ks-hooks", "ks", hooks=[{
            "name": "audit", "events": ["post_store"], "mode": "Exec",
            "command": ["/bin/true"]}]),
        satellite("AgentIdentity", "ks-agent", "ks",
                  serviceAccountRef={"name": "ks-agent"}),
    ]
    operated.apply(*satellites)
    for body in satellites:  # made before their cortex: they wait for it
        operated.wait_condition(body["kind"], body["metadata"]["name"], "Reconciling")
        read_as(kstatus, lua, operated.get(body["kind"], body["metadata"]["name"]),
                "InProgress")
    operated.apply(cortex("ks", database={"external": {"secretRef": {"name": "ks-uri"}}}))
    operated.wait_condition("MemoryCortex", "ks", "DatabaseReady", "False",
                            reason="ConnectionSecretMissing")
    read_as(kstatus, lua, operated.get("MemoryCortex", "ks"), "InProgress")

    operated.kubectl("create", "secret", "generic", "ks-uri",
                     "--from-literal=uri=postgresql://u:p@db.example.invalid/x")
    for kind, name in [("MemoryCortex", "ks"), *((b["kind"], b["metadata"]["name"])
                                                 for b in satellites)]:
        operated.wait_condition(kind, name, "Ready", seconds=120)
        read_as(kstatus, lua, operated.get(kind, name), "Current")

    # The operator's view of the same conditions, what the chart's alerts read.
    with urllib.request.urlopen(f"http://127.0.0.1:{operator.metrics}/metrics",
                                timeout=5) as reply:
        scraped = reply.read().decode()
    assert (f'cortex_operator_condition{{kind="MemoryCortex",name="ks",'
            f'namespace="{operated.namespace}",type="Ready"}} 1.0') in scraped
    newest = operated.get("MemoryCortex", "ks")["status"]["schemaVersion"]
    operated.apply(cortex("ks-future", schema={"targetVersion": newest + 1}))
    operated.wait_condition("MemoryCortex", "ks-future", "Stalled")
    read_as(kstatus, lua, operated.get("MemoryCortex", "ks-future"), "Failed")


def fast_body(op: FastOperated) -> dict[str, Any]:
    body = op.get("MemoryCortex", "mem")
    assert body is not None
    return body


async def test_a_rollout_reads_in_progress_until_its_pods_are_available(
        op: FastOperated, kstatus: Path, lua: str) -> None:
    """kwok makes a server available at once; the passes over a Deployment still rolling
    (the operator's own, on the in-memory cluster) read InProgress, then Current."""
    op.apply(fast_cortex("mem"))
    await op.reconcile("MemoryCortex", "mem")
    database_runs(op)
    await op.reconcile("MemoryCortex", "mem")
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version))
    await op.reconcile("MemoryCortex", "mem")
    assert op.reasons("MemoryCortex", "mem")["ServerReady"][0] == "False"
    read_as(kstatus, lua, fast_body(op), "InProgress")
    server_rolled(op)
    await op.reconcile("MemoryCortex", "mem")
    read_as(kstatus, lua, fast_body(op), "Current")


async def test_a_failed_migration_reads_failed(op: FastOperated, kstatus: Path,
                                               lua: str) -> None:
    op.apply(fast_cortex("mem"))
    await op.reconcile("MemoryCortex", "mem")
    database_runs(op)
    await op.reconcile("MemoryCortex", "mem")
    read_as(kstatus, lua, fast_body(op), "InProgress")  # migrating
    job_finished(op, n.job_name("mem", op.rt.defaults.schema_version), "Failed",
                 "BackoffLimitExceeded")
    await op.reconcile("MemoryCortex", "mem")
    assert op.reasons("MemoryCortex", "mem")["SchemaReady"] == ("False", "MigrationFailed")
    read_as(kstatus, lua, fast_body(op), "Failed")
