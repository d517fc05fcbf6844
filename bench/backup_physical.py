"""Physical backup benchmark: a cloudNativePG cortex backed up to MinIO and restored, verified,
into a new cortex, on the real node (issue 24).

Run alone: ``python -m bench.backup_physical [--size N]`` (root, the real node built by ``make
node-deps``; without it, it says what is missing and writes nothing). It starts the node,
installs the chart, CloudNativePG (hack/cnpg.py) and the object store (hack/objectstore.py),
makes ``bench-src`` (one instance, ``backup`` to the store) and fills it with ``--size``
memories (default 100k) through ``POST /v1/memories:batch``, 1,000 per request. Measured:

- **backup**: an on-demand ``Backup`` of the filled cluster, from its creation to
  ``completed`` (barman-cloud-backup to MinIO through the node's bridge), and its size in
  the bucket; where that time goes: the Backup's phases as polled each second, its own
  ``startedAt``/``stoppedAt``, and the instance's log lines about the backup and WAL
  archiving with their timestamps (``timeline``);
- **restore**: a new cortex ``bench-dst`` with ``bootstrap.recovery`` from that folder, from
  its creation to its Cluster healthy (barman-cloud-restore and WAL replay), then the
  verification Job (``cortexctl audit verify --deep``: events per second), then Ready.

Writes the ``physical`` object of docs/benchmarks/backup.json (the logical path's keys are
kept), with the machine's load average before, during and after.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from e2e import hacluster
from hack import cnpg, objectstore
from hack.forwarding import Forward
from hack.k8s.localkube import binaries
from hack.k8s.localkube.realnode import RealNode
from hack.k8s.localkube.realnode_cli import images_dir
from hack.support.realnode import missing_pieces
from hack.support.waiting import wait_until
from minio import Minio

from bench.common import RESULTS, ROOT
from bench.ha import Kube, call, sentence

SOURCE, TARGET, BUCKET, CREDENTIALS = "bench-src", "bench-dst", "bench-backups", "s3"
NAMESPACE = "bench-backup"
BATCH = 1000


def install(kube: Kube) -> float:
    """The chart and CloudNativePG (as bench.ha installs them); seconds."""
    began = time.monotonic()
    kube.ok("create", "namespace", NAMESPACE)
    kube.ok("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted")
    kube.helm("install", "attested-cortex", str(ROOT / "charts" / "attested-cortex"),
              "--namespace", NAMESPACE, "--set", "image.pullPolicy=IfNotPresent",
              "--wait", "--timeout", "4m")
    installer = cnpg.Installer(kubectl=kube.kubectl, manifest=cnpg.local_manifest(kube.bin_dir))
    installer.apply()
    wait_until(lambda: installer.deployment_available() and installer.webhooks_answer(),
               seconds=300, interval_s=1.0, what="CloudNativePG Available")
    kube.ok("create", "serviceaccount", "bench-writer", "-n", NAMESPACE)
    return round(time.monotonic() - began, 1)


def cortex(name: str, **database: Any) -> dict[str, Any]:
    body = hacluster.memorycortex(name, NAMESPACE, instances=1, synchronous=None)
    body["spec"]["database"]["cloudNativePG"].update(database)
    body["spec"]["quotas"] = {"requestsPerSecond": 100000, "storagePerAgent": "10Gi"}
    return body


def store_spec() -> dict[str, Any]:
    return {"endpoint": objectstore.endpoint(), "bucket": BUCKET,
            "credentialsSecretRef": {"name": CREDENTIALS}}


def condition(kube: Kube, name: str, type_: str) -> dict[str, Any]:
    found = json.loads(kube.ok("get", f"memorycortex/{name}", "-n", NAMESPACE, "-o", "json"))
    return next((c for c in (found.get("status") or {}).get("conditions") or []
                 if c["type"] == type_), {})


def forward(kube: Kube, name: str, log: Path) -> Forward:
    forwarding = Forward(lambda port: [str(kube.bin_dir / "kubectl"), "port-forward", "-n",
                                       NAMESPACE, f"svc/{name}", f"{port}:8080", "--address",
                                       "127.0.0.1"], log=log, env=kube.env).start()
    if not forwarding.wait_listening(timeout=60):
        raise RuntimeError(f"port-forward of {name} failed: {log.read_text()[-2000:]}")
    return forwarding


def fill_batches(base: str, token: str, size: int) -> float:
    """``size`` memories through ``POST /v1/memories:batch``, 1,000 per request; seconds."""
    began = time.monotonic()
    rng = random.Random(24)
    for at in range(0, size, BATCH):
        body = {"memories": [{"namespace": "bench/fill", "content": sentence(rng, number)}
                             for number in range(at, min(at + BATCH, size))]}
        status, answer = call(base, token, "POST", "/v1/memories:batch", body, timeout=300)
        if status != 201:
            raise RuntimeError(f"batch at {at} refused with {status}: {answer}")
    return round(time.monotonic() - began, 1)


#: What the instance logs about a backup: CloudNativePG's own lines and PostgreSQL's records.
ABOUT_BACKUP = re.compile(r"backup|checkpoint|barman|archiv|switch", re.IGNORECASE)
#: One per WAL segment, beside its "Archived WAL file": left out so the cap keeps the rest.
NOISE = "Executing barman-cloud-wal-archive"


def instance_log(kube: Kube, since: str, began: float) -> list[str]:
    """The source instance's log lines about the backup, as seconds after ``began``'s
    wall-clock instant (``since``), oldest first."""
    text = kube.ok("logs", f"{SOURCE}-db-1", "-c", "postgres", "-n", NAMESPACE,
                   f"--since-time={since}")
    lines = []
    for raw in text.splitlines():
        try:
            entry = json.loads(raw)
        except json.JSONDecodeError:
            continue
        record = entry.get("record") or {}
        words = str(record.get("message") or entry.get("msg") or "")
        if not ABOUT_BACKUP.search(words) or NOISE in words or not entry.get("ts"):
            continue
        at = _stamp(str(entry["ts"])) - began
        lines.append(f"+{at:7.1f} s {words[:300]}")
    return lines[:200]


def backup(kube: Kube, label: str) -> dict[str, Any]:
    """An on-demand Backup of the source's Cluster, created to completed, with where the time
    went: the phases seen (polled each second), the Backup's own start and stop, and the
    instance's log lines about it."""
    name = f"{SOURCE}-{label}-{int(time.time())}"
    since = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    wall = time.time()
    kube.ok("apply", "-f", "-", input=json.dumps({
        "apiVersion": "postgresql.cnpg.io/v1", "kind": "Backup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"cluster": {"name": f"{SOURCE}-db"}, "method": "barmanObjectStore"}}))
    began = time.monotonic()
    phases: dict[str, float] = {}
    found: dict[str, Any] = {}

    def completed() -> bool:
        found.update(json.loads(kube.ok("get", f"backups.postgresql.cnpg.io/{name}", "-n",
                                        NAMESPACE, "-o", "json")))
        phase = str((found.get("status") or {}).get("phase") or "new")
        phases.setdefault(phase, round(time.monotonic() - began, 1))
        if phase == "failed":
            raise RuntimeError(f"Backup {name} failed: {found.get('status')}")
        return phase == "completed"
    wait_until(completed, seconds=3600, interval_s=1.0, what=f"Backup {name} completed")
    took = round(time.monotonic() - began, 1)
    status = found.get("status") or {}
    own = {k: status.get(k) for k in ("startedAt", "stoppedAt", "beginWal", "endWal",
                                      "beginLSN", "endLSN")}
    if status.get("startedAt") and status.get("stoppedAt"):
        own["started_after_s"] = round(_stamp(status["startedAt"]) - wall, 1)
        own["barman_s"] = round(_stamp(status["stoppedAt"]) - _stamp(status["startedAt"]), 1)
    return {"seconds": took, "phases_at_s": phases, "backup_status": own,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "timeline": instance_log(kube, since, wall)}


def immediate_checkpoint(kube: Kube) -> None:
    """Ask CloudNativePG for an immediate checkpoint at backup start. Measured first against
    an operator that did not set it (the first backup had the spread checkpoint); the
    operator sets it since (ADR 0038), and then both backups have it and the second one
    shows a backup that is not queued behind the ScheduledBackup's first."""
    kube.ok("patch", f"clusters.postgresql.cnpg.io/{SOURCE}-db", "-n", NAMESPACE, "--type",
            "merge", "-p", json.dumps({"spec": {"backup": {"barmanObjectStore": {
                "data": {"immediateCheckpoint": True}}}}}))


def restore(kube: Kube) -> dict[str, Any]:
    kube.ok("apply", "-f", "-", input=json.dumps(cortex(TARGET, bootstrap={"recovery": {
        "objectStore": store_spec(), "sourceCortex": SOURCE}})))
    began = time.monotonic()
    wait_until(lambda: condition(kube, TARGET, "DatabaseReady").get("status") == "True",
               seconds=1800, interval_s=1.0, what=f"{TARGET}'s Cluster restored")
    restored = round(time.monotonic() - began, 1)
    wait_until(lambda: condition(kube, TARGET, "DataVerified").get("reason") in (
        "Verified", "RestoreNotVerified"), seconds=1800, interval_s=1.0, what="verification")
    job = json.loads(kube.ok("get", f"job/{TARGET}-verify-restore", "-n", NAMESPACE, "-o",
                             "json"))["status"]
    verify_s = (_stamp(job["completionTime"]) - _stamp(job["startTime"])) if job.get(
        "completionTime") else None
    wait_until(lambda: condition(kube, TARGET, "Ready").get("status") == "True",
               seconds=600, interval_s=1.0, what=f"{TARGET} Ready")
    report = json.loads(kube.ok("get", f"memorycortex/{TARGET}", "-n", NAMESPACE, "-o",
                                "jsonpath={.status.restore}"))
    events = int(report.get("events") or 0)
    return {"cluster_restored_s": restored, "verification_job_s": verify_s,
            "verified_events_per_s": round(events / verify_s) if verify_s else None,
            "ready_s": round(time.monotonic() - began, 1), "report": report}


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def write_physical(data: dict[str, Any]) -> Path:
    """``physical`` in docs/benchmarks/backup.json; the logical path's keys are kept."""
    path = RESULTS / "backup.json"
    whole = json.loads(path.read_text()) if path.exists() else {"area": "backup"}
    whole["physical"] = {"measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                         "cpus": os.cpu_count(), **data}
    path.write_text(json.dumps(whole, indent=2) + "\n")
    return path


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backup_physical")
    parser.add_argument("--size", type=int, default=100_000)
    args = parser.parse_args(argv)
    if reasons := missing_pieces():
        print(f"bench backup_physical: skipped, the real node is not built: "
              f"{'; '.join(reasons)} (make node-deps)", file=sys.stderr)
        return 0
    home = Path(tempfile.mkdtemp(prefix="bench-backup-"))
    bin_dir = binaries.bin_dir()
    node = RealNode(bin_dir=bin_dir, images_dir=images_dir())
    forwards: list[Forward] = []
    try:
        node.start()
        kube = Kube(node.kubeconfig, bin_dir, home)
        took = install(kube)
        access, secret = "bench", secrets.token_hex(20)
        store = objectstore.Installer(kubectl=kube.kubectl)
        store.apply(objectstore.manifests(access_key=access, secret_key=secret))
        store.apply([objectstore.credentials_secret(CREDENTIALS, NAMESPACE, access_key=access,
                                                    secret_key=secret)])
        wait_until(store.ready, seconds=180, interval_s=1.0, what="MinIO ready")
        kube.ok("apply", "-f", "-", input=json.dumps(cortex(SOURCE, backup={
            "objectStore": store_spec(), "retention": "7d"})))
        kube.ok("wait", "-n", NAMESPACE, "--for=condition=Ready", "--timeout=600s",
                f"memorycortex/{SOURCE}", timeout=620)
        token = kube.ok("create", "token", "bench-writer", "-n", NAMESPACE, "--duration",
                        "4h").strip()
        forwards.append(forward(kube, SOURCE, home / "src.log"))
        load_before = [round(x, 2) for x in os.getloadavg()]
        filled = fill_batches(forwards[-1].url, token, args.size)
        as_configured = backup(kube, "configured")
        immediate_checkpoint(kube)
        immediate = backup(kube, "immediate")
        ip = store.pod_ip()
        client = Minio(f"{ip}:{objectstore.PORT}", access_key=access, secret_key=secret,
                       secure=False)
        stored = sum(o.size or 0 for o in client.list_objects(BUCKET, recursive=True))
        restored = restore(kube)
        path = write_physical({
            "command": f"python -m bench.backup_physical --size {args.size}",
            "size_memories": args.size, "setup_s": took, "fill_s": filled,
            "fill": f"POST /v1/memories:batch, {BATCH} per request, through a port-forward",
            "backup_s": as_configured["seconds"], "backup": as_configured,
            "backup_immediate_checkpoint": immediate, "bucket_bytes": stored,
            "restore": restored, "load_average_before": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()]})
        print(f"wrote {path}: backup {as_configured['seconds']} s (immediate checkpoint "
              f"{immediate['seconds']} s), restore {restored}")
    finally:
        for forwarding in forwards:
            forwarding.stop()
        node.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
