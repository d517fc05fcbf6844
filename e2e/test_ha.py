"""A MemoryCortex on CloudNativePG on the real node: Ready, then primary changes with no loss.

The chart's operator (a real pod) turns ``spec.database.cloudNativePG`` (3 instances, one
synchronous replica) into a CNPG Cluster (CNPG built here and installed by tests/support/cnpg.py),
runs the migration against it and points the server at the read-write Service. Then, with a
writer (hack/support/writing.py) storing memories (with links and transcripts among them) at
a steady rate and retrying each write with its Idempotency-Key until acknowledged, the primary
is (1) deleted, (2) its postgres SIGKILLed; a replica is deleted; a switchover is asked for as
``kubectl cnpg promote`` does. After each, every acknowledged id is present exactly once (the
memories as the API lists them, the links and transcripts as the primary's database holds
them) and the deep audit is clean; the gap (last acknowledgement before the disruption to the
first after) is printed.

The tests share the cortex (module scope) and run in file order; one failover per case keeps
the module's time reasonable (it prints its figures; bench/ha.py repeats them).
"""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from hack.support.waiting import wait_until
from hack.support.writing import (
    SteadyWriter,
    gap_around,
    http_post,
    list_namespace,
    longest_gap,
    tally,
)
from tests.support.cnpg import CloudNativePG

from e2e import hacluster
from e2e.conftest import kubectl, kubectl_json
from e2e.test_system import Forward

CORTEX = "ha-memory"
INSTANCES = 3
READY = "480s"           # the Cluster (initdb, two pg_basebackups), the migration, the server
SETTLE_S = 300.0         # a failover and the old primary back as a replica
WRITE_RATE = 5.0         # memories a second: steady, small against the machine
BEFORE = 10              # acknowledgements before the disruption...
AFTER = 10               # ...and after it
LINKS_EVERY = 3          # a link between the last two memories every third write...
TRANSCRIPTS_EVERY = 5    # ...and a transcript every fifth


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def ha(namespace: str, cnpg: CloudNativePG) -> Iterator[str]:
    """The cloudNativePG cortex in the release namespace, Ready."""
    ok(kubectl("create", "serviceaccount", "ha-writer", "-n", namespace))
    ok(kubectl("apply", "-f", "-",
               input=json.dumps(hacluster.memorycortex(CORTEX, namespace, instances=INSTANCES))))
    ready = kubectl("wait", "-n", namespace, "--for=condition=Ready", f"--timeout={READY}",
                    f"memorycortex/{CORTEX}")
    if ready.returncode != 0:
        pytest.fail(f"{CORTEX} not Ready: {ready.stderr}\n" + kubectl(
            "get", "-n", namespace, "mcx,cluster,pods,jobs", "-o", "wide").stdout + kubectl(
            "get", "-n", namespace, f"mcx/{CORTEX}", "-o", "jsonpath={.status}").stdout)
    # Ready means the primary takes writes (ClusterDegraded is Ready too): the failover cases
    # start from every replica streaming.
    wait_until(_settled(namespace), seconds=SETTLE_S, interval_s=1.0,
               what=f"all {INSTANCES} instances ready")
    yield namespace


@pytest.fixture(scope="module")
def forward(ha: str) -> Iterator[Forward]:
    forwarding = Forward(ha, service=CORTEX)
    forwarding.start()
    yield forwarding
    forwarding.stop()


@pytest.fixture(scope="module")
def token(ha: str) -> str:
    return ok(kubectl("create", "token", "ha-writer", "-n", ha, "--duration", "2h")).strip()


def _get(forward: Forward, token: str) -> Any:
    def get(path: str) -> tuple[int, Any]:
        request = urllib.request.Request(  # noqa: S310 (the loopback forward)
            forward.base + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")
    return get


def _disrupted(forward: Forward, token: str, namespace: str, what: str,
               disrupt: Any, *, settled: Any = None) -> float:
    """Write steadily, disrupt, keep writing until the cluster settled and AFTER more acks;
    then every acknowledged write is there once and the audit is clean. Returns the gap."""
    writer = SteadyWriter(http_post(lambda: forward.base, token), namespace=f"ha/{what}",
                          prefix=f"{what}-{int(time.time())}", rate=WRITE_RATE,
                          links_every=LINKS_EVERY, transcripts_every=TRANSCRIPTS_EVERY).start()
    try:
        wait_until(lambda: len(writer.ledger.acks) >= BEFORE, seconds=60,
                   what=f"{BEFORE} acknowledged writes before {what}")
        moment = time.monotonic()
        disrupt()
        if settled is not None:
            wait_until(settled, seconds=SETTLE_S, interval_s=1.0, what=f"the cluster after {what}")
        wait_until(lambda: writer.acked_since(moment) >= AFTER, seconds=SETTLE_S,
                   interval_s=0.5, what=f"{AFTER} acknowledged writes after {what}")
    finally:
        ledger = writer.stop()
    gap = gap_around(ledger.acks, moment)
    # The old primary may serve on while it stops: the outage can come after the moment.
    longest, _, _ = longest_gap(ledger.acks, start=moment)
    counted = tally(ledger, list_namespace(_get(forward, token), f"ha/{what}"))
    links = tally(ledger, _held(namespace, "link", "id::text, src_id || '->' || dst_id",
                                "links"), "link")
    transcripts = tally(ledger, _held(namespace, "transcript", "id::text, metadata->>'write'",
                                      f"transcripts WHERE namespace = 'ha/{what}'"), "transcript")
    print(f"\n{what}: {counted.acknowledged} memories, {links.acknowledged} links, "
          f"{transcripts.acknowledged} transcripts acknowledged, gap {gap:.1f}s (longest "
          f"without an acknowledgement afterwards {longest:.1f}s), retried {ledger.retried}, "
          f"answers {dict(ledger.statuses)}")
    assert counted.clean, counted
    assert links.acknowledged and links.clean, links
    assert transcripts.acknowledged and transcripts.clean, transcripts
    assert not [a for a in ledger.statuses if a.startswith("500")], ledger.statuses
    audit = hacluster.deep_audit(kubectl, namespace, CORTEX)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    return longest


def _held(namespace: str, kind: str, columns: str, source: str) -> list[dict[str, Any]]:
    """The objects of ``kind`` the database holds: id, and what tells writes apart."""
    found = hacluster.rows(kubectl, namespace, CORTEX, f"SELECT {columns} FROM {source}")
    return [{"id": row[0], "content": row[1]} for row in found]


def _settled(namespace: str, *, not_primary: str | None = None) -> Any:
    def check() -> bool:
        if not hacluster.healthy(kubectl, namespace, CORTEX, INSTANCES):
            return False
        return not_primary is None or hacluster.primary(kubectl, namespace, CORTEX) != not_primary
    return check


def test_a_three_instance_cortex_becomes_ready(ha: str) -> None:
    status = hacluster.cluster_status(kubectl, ha, CORTEX)
    assert status["readyInstances"] == INSTANCES, status
    mcx = kubectl_json("get", f"memorycortex/{CORTEX}", "-n", ha)["status"]
    assert mcx.get("primary") == status["currentPrimary"], mcx
    # The migration ran once, against the Cluster.
    jobs = kubectl_json("get", "jobs", "-n", ha, "-l", f"app.kubernetes.io/instance={CORTEX}")
    assert len(jobs["items"]) == 1, [j["metadata"]["name"] for j in jobs["items"]]
    assert jobs["items"][0]["status"].get("succeeded") == 1
    # (a first pod may have found no primary behind the Service yet and been retried)
    job = jobs["items"][0]["metadata"]["name"]
    done = [p["metadata"]["name"] for p in kubectl_json(
        "get", "pods", "-n", ha, "-l", f"job-name={job}")["items"]
        if p["status"].get("phase") == "Succeeded"]
    assert len(done) == 1, done
    assert "schema version 0 -> " in ok(kubectl("logs", "-n", ha, f"pod/{done[0]}"))
    # The server reads the read-write Service's URI from CNPG's application Secret.
    deployment = kubectl_json("get", f"deployment/{CORTEX}-server", "-n", ha)
    server = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                  if c["name"] == "server")
    env = {e["name"]: e for e in server.get("env", [])}
    secret = env["CORTEX_DATABASE_URL"]["valueFrom"]["secretKeyRef"]
    assert secret["name"] == f"{hacluster.cluster_name(CORTEX)}-app", secret
    app = kubectl_json("get", "secret", secret["name"], "-n", ha)["data"]
    assert base64.b64decode(app["host"]).decode() == f"{hacluster.cluster_name(CORTEX)}-rw"
    printed = ok(kubectl("get", "mcx", CORTEX, "-n", ha))
    assert status["currentPrimary"] in printed


def test_deleting_the_primary_loses_no_acknowledged_write(ha: str, forward: Forward,
                                                          token: str) -> None:
    old = hacluster.primary(kubectl, ha, CORTEX)
    gap = _disrupted(forward, token, ha, "delete-primary",
                     lambda: ok(kubectl("delete", "pod", old, "-n", ha, "--wait=false")),
                     settled=_settled(ha, not_primary=old))
    assert gap < 120, gap


def test_sigkill_of_the_primarys_postgres_loses_no_acknowledged_write(
        ha: str, forward: Forward, token: str) -> None:
    old = hacluster.primary(kubectl, ha, CORTEX)
    _disrupted(forward, token, ha, "sigkill-primary",
               lambda: hacluster.kill_postgres(kubectl, ha, old), settled=_settled(ha))


def test_deleting_a_replica_refuses_no_write(ha: str, forward: Forward, token: str) -> None:
    current = hacluster.primary(kubectl, ha, CORTEX)
    replica = next(p for p in hacluster.instance_pods(kubectl, ha, CORTEX) if p != current)
    writer = SteadyWriter(http_post(lambda: forward.base, token), namespace="ha/replica",
                          prefix=f"replica-{int(time.time())}", rate=WRITE_RATE).start()
    try:
        wait_until(lambda: len(writer.ledger.acks) >= BEFORE, seconds=60, what="writes")
        ok(kubectl("delete", "pod", replica, "-n", ha, "--wait=false"))
        wait_until(_settled(ha), seconds=SETTLE_S, interval_s=1.0, what="the replica rejoining")
    finally:
        ledger = writer.stop()
    print(f"\nreplica deleted: {len(ledger.acks)} acknowledged, answers {dict(ledger.statuses)}")
    assert ledger.failures == [], ledger.failures[:10]
    assert hacluster.primary(kubectl, ha, CORTEX) == current
    assert tally(ledger, list_namespace(_get(forward, token), "ha/replica")).clean


def test_a_switchover_loses_no_write(ha: str, forward: Forward, token: str) -> None:
    old = hacluster.primary(kubectl, ha, CORTEX)
    target = next(p for p in hacluster.instance_pods(kubectl, ha, CORTEX) if p != old)
    _disrupted(forward, token, ha, "switchover",
               lambda: hacluster.promote(kubectl, ha, CORTEX, target),
               settled=lambda: _settled(ha)() and hacluster.primary(kubectl, ha, CORTEX) == target)
    wait_until(lambda: kubectl_json("get", f"memorycortex/{CORTEX}", "-n", ha)["status"].get(
        "primary") == target, seconds=120, interval_s=1.0, what="status.primary follows")
