"""HA benchmark: a cortex on a 3-instance synchronous CloudNativePG cluster, on the real node.

Run by ``make bench`` (``python -m bench ha``) or alone: ``python -m bench.ha [--rounds N]
[--size N]``. Needs the real node built (``make node-deps``: its binaries, images and
CloudNativePG) and root; without them it says what is missing and writes nothing. It starts the
node, installs the chart and CloudNativePG (hack/cnpg.py), and runs two cortexes side by side:
``bench-single`` (managed: one PostgreSQL pod) and ``bench-ha`` (cloudNativePG: 3 instances, one
synchronous replica). Measured, through a port-forward of each cortex's Service, a client on the
same 2 cores:

- **write unavailability on primary deletion**, ``--rounds`` times (default 5): a steady writer
  (hack/support/writing.py, one write at a time at 5 writes/s, each retried with its
  Idempotency-Key after the answer's Retry-After until acknowledged) runs while the primary
  pod is deleted; the gap is the last acknowledgement before to the first after. Beside it,
  when CNPG moved the primary (its Cluster's ``currentPrimary``) and when the read-write
  Service's endpoint reached it, so the gap splits into CNPG's failover and what follows it
  (the Service's endpoint moving, the surviving replica following the new primary, the
  server's reconnect; a write that arrives meanwhile waits for it in the server, ADR 0126):
  ``beyond_promotion_s``, whose goal is at most 2 s (issue 38, ADR 0090), and the slowest
  write acknowledged at its first attempt (issue 38: the first write after a promotion hung
  7-9 s).
- **acknowledged writes lost** across all rounds: acknowledged ids the cortex does not hold,
  and contents held twice; with the counts of acknowledged writes and failovers.
- **store throughput and recall p95 at ``--size``** (default 10k) on both cortexes in the same
  run: filled by concurrent stores, then sequential stores and recalls timed.

Writes docs/benchmarks/ha.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from e2e import hacluster
from hack import cnpg
from hack.forwarding import Forward
from hack.k8s.localkube import binaries
from hack.k8s.localkube.realnode import RealNode
from hack.k8s.localkube.realnode_cli import IMAGES_SCRIPT, images_dir
from hack.support.realnode import missing_pieces
from hack.support.waiting import wait_until
from hack.support.writing import (
    SteadyWriter,
    gap_around,
    http_post,
    list_namespace,
    longest_gap,
    tally,
)

from bench.common import ROOT, percentiles, write_result

NAMESPACE = "bench-ha"
SINGLE = "bench-single"
HA = "bench-ha"
WRITE_RATE = 5.0
SETTLE_S = 300.0
WORDS = ("backup", "deploy", "latency", "billing", "cache", "planner", "friday", "schema",
         "replica", "primary", "index", "vector", "graph", "audit", "token", "quota")


class Kube:
    """kubectl and helm of the node's bin dir, against its admin kubeconfig."""

    def __init__(self, kubeconfig: Path, bin_dir: Path, home: Path) -> None:
        self.bin_dir = bin_dir
        self.env = {"KUBECONFIG": str(kubeconfig), "PATH": f"{bin_dir}:/usr/bin:/bin",
                    "HOME": str(home), "HELM_CACHE_HOME": str(home / "helm-cache"),
                    "HELM_CONFIG_HOME": str(home / "helm-config"),
                    "HELM_DATA_HOME": str(home / "helm-data")}

    def kubectl(self, *args: str, input: str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.bin_dir / "kubectl"), *args], input=input,
                              capture_output=True, text=True, env=self.env, timeout=timeout,
                              check=False)

    def ok(self, *args: str, input: str | None = None, timeout: float = 300) -> str:
        done = self.kubectl(*args, input=input, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args[:4])}: {done.stderr.strip()}")
        return done.stdout

    def helm(self, *args: str) -> None:
        done = subprocess.run([str(self.bin_dir / "helm"), *args], capture_output=True,
                              text=True, env=self.env, timeout=400, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args[:2])}: {done.stderr.strip()}")


def managed(name: str) -> dict[str, Any]:
    return {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "MemoryCortex",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}},
                     "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                     "permissions": {"mode": "Off"}}}


def install(kube: Kube, parameters: dict[str, str] | None = None) -> dict[str, float]:
    """Chart, CloudNativePG, both cortexes Ready; seconds per step. ``parameters``: extra
    PostgreSQL parameters of the HA cortex (``--parameter``, for experiments)."""
    took: dict[str, float] = {}
    began = time.monotonic()
    kube.ok("create", "namespace", NAMESPACE)
    kube.ok("label", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted")
    kube.helm("install", "attested-cortex", str(ROOT / "charts" / "attested-cortex"),
              "--namespace", NAMESPACE, "--set", "image.pullPolicy=IfNotPresent",
              "--wait", "--timeout", "4m")
    took["chart"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    installer = cnpg.Installer(kubectl=kube.kubectl,
                               manifest=cnpg.local_manifest(kube.bin_dir))
    installer.apply()
    wait_until(installer.deployment_available, seconds=300, interval_s=1.0,
               what="CloudNativePG Available")
    wait_until(installer.webhooks_answer, seconds=300, interval_s=1.0,
               what="CloudNativePG's webhooks")
    took["cloudnativepg"] = round(time.monotonic() - began, 1)
    began = time.monotonic()
    kube.ok("create", "serviceaccount", "bench-writer", "-n", NAMESPACE)
    cortexes = [managed(SINGLE), hacluster.memorycortex(HA, NAMESPACE, instances=3)]
    if parameters:
        cortexes[1]["spec"]["database"]["cloudNativePG"]["parameters"] = parameters
    for cortex in cortexes:  # the fill's 8 clients are one agent: no per-agent rate limit
        cortex["spec"]["quotas"] = {"requestsPerSecond": 100000, "storagePerAgent": "10Gi"}
    kube.ok("apply", "-f", "-", input=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": cortexes}))
    for name in (SINGLE, HA):
        kube.ok("wait", "-n", NAMESPACE, "--for=condition=Ready", "--timeout=600s",
                f"memorycortex/{name}", timeout=620)
    took["cortexes_ready"] = round(time.monotonic() - began, 1)
    return took


def forward(kube: Kube, name: str, log: Path) -> Forward:
    forwarding = Forward(lambda port: [str(kube.bin_dir / "kubectl"), "port-forward", "-n",
                                       NAMESPACE, f"svc/{name}", f"{port}:8080", "--address",
                                       "127.0.0.1"], log=log, env=kube.env).start()
    if not forwarding.wait_listening(timeout=60):
        raise RuntimeError(f"port-forward of {name} failed: {log.read_text()[-2000:]}")
    return forwarding


def call(base: str, token: str, method: str, path: str, body: Any = None, *,
         timeout: float = 30) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        base + path, data=data, method=method,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def sentence(rng: random.Random, number: int) -> str:
    return f"note {number}: " + " ".join(rng.choice(WORDS) for _ in range(12))


def fill(base: str, token: str, size: int) -> float:
    """``size`` memories by 8 concurrent clients; seconds taken."""
    began = time.monotonic()

    def one(number: int) -> None:
        rng = random.Random(number)
        for _ in range(5):
            status, _ = call(base, token, "POST", "/v1/memories",
                             {"namespace": "bench/fill", "content": sentence(rng, number)})
            if status == 201:
                return
        raise RuntimeError(f"store {number} failed with {status}")

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(size)))
    return round(time.monotonic() - began, 1)


def speed(base: str, token: str, *, stores: int = 300, recalls: int = 200) -> dict[str, Any]:
    """Sequential stores (per second and latency) and recalls (latency)."""
    rng = random.Random(7)
    store_ms = []
    began = time.monotonic()
    for number in range(stores):
        t0 = time.perf_counter()
        status, _ = call(base, token, "POST", "/v1/memories",
                         {"namespace": "bench/speed", "content": sentence(rng, number)})
        store_ms.append((time.perf_counter() - t0) * 1000)
        assert status == 201, status
    per_second = round(stores / (time.monotonic() - began), 1)
    recall_ms = []
    for _ in range(recalls):
        query = " ".join(rng.choice(WORDS) for _ in range(2))
        t0 = time.perf_counter()
        status, _ = call(base, token, "POST", "/v1/recall",
                         {"query": query, "namespace": "bench/fill", "limit": 10})
        recall_ms.append((time.perf_counter() - t0) * 1000)
        assert status == 200, status
    return {"stores_per_second": per_second, "store_ms": percentiles(store_ms),
            "recall_ms": percentiles(recall_ms)}


def keep_logs(kube: Kube, logs: Path | None, round_number: int) -> None:
    """The instances' logs after a round (``--logs``): the surviving replica's PostgreSQL
    and instance manager lines say when it followed the new primary."""
    if logs is None:
        return
    logs.mkdir(parents=True, exist_ok=True)
    for pod in hacluster.instance_pods(kube.kubectl, NAMESPACE, HA):
        done = kube.kubectl("logs", "-n", NAMESPACE, pod, "-c", "postgres")
        (logs / f"round-{round_number}-{pod}.log").write_text(done.stdout + done.stderr,
                                                               encoding="utf-8")
        # what each instance's processes are doing now (a replica's startup process and
        # its walreceiver, or a restore_command it waits on)
        ps = kube.kubectl("exec", "-n", NAMESPACE, pod, "-c", "postgres", "--", "ps", "-eo",
                          "pid,etime,args")
        (logs / f"round-{round_number}-{pod}.ps").write_text(ps.stdout + ps.stderr,
                                                              encoding="utf-8")
    # the cortex server's side: when its pool lost the database and when it answered again
    # (store/pooling.py logs both ends of an outage, ADR 0126)
    done = kube.kubectl("logs", "-n", NAMESPACE, f"deployment/{HA}-server", "--timestamps")
    (logs / f"round-{round_number}-server.log").write_text(done.stdout + done.stderr,
                                                           encoding="utf-8")


def rw_endpoint_at(kube: Kube, pod: str) -> bool:
    """Whether the read-write Service's endpoints hold ``pod`` (ready): where a client's and a
    replica's connection to the primary goes. CloudNativePG names the new primary in its
    status first; the Service follows once it labels the pod and Kubernetes moves the
    endpoint (EndpointSlice, then the node's service proxy)."""
    ip = kube.ok("get", "pod", pod, "-n", NAMESPACE, "-o", "jsonpath={.status.podIP}").strip()
    slices = hacluster.get_json(kube.kubectl, "get", "endpointslices", "-n", NAMESPACE, "-l",
                                f"kubernetes.io/service-name={hacluster.cluster_name(HA)}-rw")
    return any(ip in e.get("addresses", []) and e.get("conditions", {}).get("ready")
               for item in slices["items"] for e in item.get("endpoints") or [])


def failovers(kube: Kube, base: str, token: str, rounds: int,
              logs: Path | None = None) -> dict[str, Any]:
    """Delete the primary ``rounds`` times under a steady writer."""
    writer = SteadyWriter(http_post(lambda: base, token), namespace="bench/failover",
                          prefix=f"failover-{int(time.time())}", rate=WRITE_RATE).start()
    results = []
    try:
        for round_number in range(rounds):
            wait_until(lambda: hacluster.healthy(kube.kubectl, NAMESPACE, HA, 3), seconds=SETTLE_S,
                       interval_s=1.0, what="a healthy cluster before the round")
            before = len(writer.ledger.acks)
            wait_until(lambda b=before: len(writer.ledger.acks) >= b + 10, seconds=60,
                       what="writes flowing")
            old = hacluster.primary(kube.kubectl, NAMESPACE, HA)
            moment = time.monotonic()
            kube.ok("delete", "pod", old, "-n", NAMESPACE, "--wait=false")
            moved = wait_until(
                lambda o=old: hacluster.primary(kube.kubectl, NAMESPACE, HA) != o
                and time.monotonic(), seconds=SETTLE_S, interval_s=0.2, what="a new primary")
            new_primary = hacluster.primary(kube.kubectl, NAMESPACE, HA)
            # an upper bound: the endpoint may have moved before the status named the primary
            routed = wait_until(lambda p=new_primary: rw_endpoint_at(kube, p)
                                and time.monotonic(), seconds=SETTLE_S, interval_s=0.1,
                                what="the read-write Service at the new primary")
            wait_until(lambda m=float(moved): writer.acked_since(m) >= 10, seconds=SETTLE_S,
                       interval_s=0.2, what="writes after the new primary")
            # The outage can come after the deletion (the old primary stops first): the
            # longest stretch without an acknowledgement from the deletion on.
            gap, _, _ = longest_gap(list(writer.ledger.acks), start=moment)
            around = gap_around(list(writer.ledger.acks), moment)
            promoted = float(moved) - moment
            # what the writer was answered meanwhile, seconds after the deletion
            refused = [[round(at - moment, 2), what] for at, what in list(writer.ledger.failures)
                       if at > moment]
            endpoint = float(routed) - moment
            results.append({"round": round_number + 1, "refused": refused, "old_primary": old,
                            "new_primary": new_primary,
                            "gap_s": round(gap, 2), "gap_at_deletion_s": round(around, 2),
                            "primary_moved_after_s": round(promoted, 2),
                            "endpoint_moved_after_s": round(endpoint, 2),
                            "beyond_promotion_s": round(gap - promoted, 2),
                            "beyond_endpoint_s": round(gap - endpoint, 2)})
            print(f"  failover {round_number + 1}: gap {gap:.1f}s (CNPG moved the primary "
                  f"after {promoted:.1f}s, the -rw Service after {endpoint:.1f}s; "
                  f"{gap - promoted:.1f}s beyond the primary; deleted at "
                  f"{time.time() - (time.monotonic() - moment):.2f} epoch; answered "
                  f"{refused})", flush=True)
            keep_logs(kube, logs, round_number + 1)
    finally:
        ledger = writer.stop()
    held = list_namespace(lambda path: call(base, token, "GET", path), "bench/failover")
    counted = tally(ledger, held)
    gaps = sorted(r["gap_s"] for r in results)
    beyond = sorted(r["beyond_promotion_s"] for r in results)
    slowest = max((a.acked - a.first_sent for a in ledger.acks if a.attempts == 1),
                  default=0.0)
    return {"rounds": results, "failovers": len(results),
            "gap_s": {"p50": gaps[len(gaps) // 2] if gaps else None,
                      "max": gaps[-1] if gaps else None},
            "beyond_promotion_s": {"p50": beyond[len(beyond) // 2] if beyond else None,
                                   "max": beyond[-1] if beyond else None},
            "slowest_unretried_write_s": round(slowest, 2),
            "acknowledged_writes": counted.acknowledged,
            "acknowledged_lost": len(counted.missing), "duplicated": len(counted.duplicated),
            "retried_attempts": ledger.retried, "answers": dict(ledger.statuses),
            "write_rate_per_s": WRITE_RATE}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ha")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="a PostgreSQL parameter of the HA cortex (experiments)")
    parser.add_argument("--logs", type=Path, default=None,
                        help="keep the instances' logs after each failover here")
    args = parser.parse_args(argv)
    parameters = dict(p.split("=", 1) for p in args.parameter)
    for command in ([str(binaries.SCRIPT), "node"], [str(IMAGES_SCRIPT)]):
        subprocess.run(command, check=False, capture_output=True)
    if reasons := missing_pieces():
        print(f"bench ha: skipped, the real node is not built: {'; '.join(reasons)} "
              "(make node-deps)", file=sys.stderr)
        return 0
    home = Path(tempfile.mkdtemp(prefix="bench-ha-"))
    bin_dir = binaries.bin_dir()
    node = RealNode(bin_dir=bin_dir, images_dir=images_dir())
    forwards: list[Forward] = []
    try:
        node.start()
        kube = Kube(node.kubeconfig, bin_dir, home)
        took = install(kube, parameters)
        print(f"bench ha: installed {took}", flush=True)
        token = kube.ok("create", "token", "bench-writer", "-n", NAMESPACE, "--duration",
                        "4h").strip()
        bases = {}
        for name in (SINGLE, HA):
            forwards.append(forward(kube, name, home / f"{name}.log"))
            bases[name] = forwards[-1].url
        failover = failovers(kube, bases[HA], token, args.rounds, args.logs)
        print(f"bench ha: failovers {failover['gap_s']}, lost {failover['acknowledged_lost']} "
              f"of {failover['acknowledged_writes']}", flush=True)
        sizes: dict[str, Any] = {}
        for name in (SINGLE, HA):
            filled = fill(bases[name], token, args.size)
            sizes[name] = {"filled_in_s": filled, **speed(bases[name], token)}
            print(f"bench ha: {name} {sizes[name]}", flush=True)
        ratio = round(sizes[HA]["stores_per_second"] / sizes[SINGLE]["stores_per_second"], 3)
        path = write_result("ha", {
            "goals": {"gap_s_p50_max": 30, "beyond_promotion_s_max": 2.0,
                      "acknowledged_lost": 0},
            "setup_s": took, "cnpg_version": cnpg.version(), "instances": 3,
            "synchronous": {"method": "any", "number": 1, "dataDurability": "required"},
            "parameters": parameters,
            "failover": failover, "size": args.size,
            "single": sizes[SINGLE], "ha": sizes[HA],
            "store_throughput_ratio_ha_over_single": ratio,
            "recall_p95_ms": {"single": sizes[SINGLE]["recall_ms"]["p95"],
                              "ha": sizes[HA]["recall_ms"]["p95"]},
        })
        print(f"wrote {path}")
    finally:
        for forwarding in forwards:
            forwarding.stop()
        node.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
