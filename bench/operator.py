"""Operator benchmark: children-created latency, a 200-cortex cold start, RSS and idle writes.

Run by ``make bench`` (through ``python -m bench``) or alone: ``python -m bench.operator
[--steady N] [--cold N] [--idle-s S]``. It starts its own local control plane (etcd,
kube-apiserver, controller-manager, scheduler, kwok fake node: hack/k8s/localkube), installs
the chart's CRDs and RBAC with helm (its operator pod off) into two fresh namespaces, and runs
``cortexctl operator --namespace NS`` as a subprocess with a token of the chart's
ServiceAccount, as tests/operator/conftest.py does. The bench itself observes through
watches opened with the admin kubeconfig (one stream per child kind, so no polling), and
reads the operator's ``/metrics`` and ``/proc/<pid>/status``. Goals: issue 10.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
from hack.k8s.localkube import ControlPlane, binaries
from hack.support.chart import install
from hack.support.kube import Kube
from hack.support.served import CORTEXCTL, free_port, stop

from attested_cortex.builders import names as n
from attested_cortex.controller.registry import WORKERS
from attested_cortex.crd import GROUP, VERSION
from attested_cortex.kubeclient import from_kubeconfig, ssl_context
from bench.common import percentiles, write_result

Object = dict[str, Any]
CR_PATH = f"/apis/{GROUP}/{VERSION}/namespaces/{{ns}}/memorycortexes"
SELECTOR = f"{n.MANAGED_BY_LABEL}={n.MANAGED_BY}"
#: The cortex every sample creates: examples/cortex/memorycortex.yaml's spec (managed
#: database, Kubernetes auth so the ClusterRoleBinding exists, approvals on by default).
SPEC: Object = {"database": {"managed": {"storage": {"size": "1Gi"}}},
                "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                "permissions": {"mode": "Enforce"}, "approval": {"timeoutSeconds": 900}}
#: Watched child kinds: (kind, collection path with {ns}, namespaced).
WATCHED = (
    ("Secret", "/api/v1/namespaces/{ns}/secrets"),
    ("StatefulSet", "/apis/apps/v1/namespaces/{ns}/statefulsets"),
    ("Service", "/api/v1/namespaces/{ns}/services"),
    ("NetworkPolicy", "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies"),
    ("ConfigMap", "/api/v1/namespaces/{ns}/configmaps"),
    ("ServiceAccount", "/api/v1/namespaces/{ns}/serviceaccounts"),
    ("ClusterRoleBinding", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
)
METRIC = re.compile(r'^(cortex_operator_\w+_total)\{([^}]*)\} ([0-9.e+]+)$', re.M)
SETTLE_QUIET_S = 15.0
SETTLE_MAX_S = 300.0
WAIT_ONE_S = 60.0
COLD_MAX_S = 600.0


def children(ns: str, cortex: str) -> list[tuple[str, str]]:
    """The immediate children of one managed-database cortex with Kubernetes auth."""
    return [("Secret", n.db_secret_name(cortex)), ("StatefulSet", n.db_name(cortex)),
            ("Service", n.db_name(cortex)), ("NetworkPolicy", n.db_name(cortex)),
            ("ConfigMap", n.config_name(cortex)), ("Secret", n.approval_secret_name(cortex)),
            ("ServiceAccount", n.server_name(cortex)), ("Service", n.service_name(cortex)),
            ("ClusterRoleBinding", n.tokenreview_binding_name(ns, cortex))]


def memory_cortex(name: str) -> Object:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "MemoryCortex",
            "metadata": {"name": name}, "spec": SPEC}


@dataclass
class Observer:
    """Watches one namespace: when each child and each cortex's current status appeared.

    Times are ``time.monotonic()`` when the watch event reached the bench (watch delivery
    adds a few ms on loopback). ``changed`` wakes every waiter on each event.
    """

    session: aiohttp.ClientSession
    server: str
    namespace: str
    seen: dict[tuple[str, str], float] = field(default_factory=dict)
    observed: dict[str, float] = field(default_factory=dict)
    done: dict[str, tuple[float, float]] = field(default_factory=dict)
    ready: set[str] = field(default_factory=set)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        """Open every watch; returns once the API server has accepted all of them."""
        opened = []
        for kind, path in WATCHED:
            selector = SELECTOR
            if kind == "ClusterRoleBinding":
                selector += f",{n.NAMESPACE_LABEL}={self.namespace}"
            opened.append(self._open(kind, path.format(ns=self.namespace), selector))
        opened.append(self._open("MemoryCortex", CR_PATH.format(ns=self.namespace), None))
        await asyncio.gather(*opened)

    async def _open(self, kind: str, path: str, selector: str | None) -> None:
        ready = asyncio.get_running_loop().create_future()
        task = asyncio.create_task(self._watch(kind, path, selector, ready))
        self.tasks.append(task)
        await asyncio.wait({task, ready}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            task.cancel()
            raise TimeoutError(f"watch of {kind} did not open within 60 s")
        if task.done():
            task.result()  # raises why the watch could not open
            raise RuntimeError(f"watch of {kind} ended before it opened")

    async def _watch(self, kind: str, path: str, selector: str | None,
                     ready: asyncio.Future[None]) -> None:
        version: str | None = None
        while True:
            params = {"watch": "true", "timeoutSeconds": "1800", "allowWatchBookmarks": "true"}
            if selector:
                params["labelSelector"] = selector
            if version:
                params["resourceVersion"] = version
            async with self.session.get(self.server + path, params=params) as response:
                if response.status == 429 or response.status >= 500:  # e.g. a new CRD's
                    await asyncio.sleep(0.5)  # watch cache still starting: bounded by _open
                    continue
                response.raise_for_status()
                if not ready.done():
                    ready.set_result(None)
                async for line in response.content:
                    event = json.loads(line)
                    obj = event["object"]
                    if event["type"] == "ERROR":  # 410 Gone: start again from now
                        version = None
                        break
                    version = obj["metadata"]["resourceVersion"]
                    if event["type"] in ("ADDED", "MODIFIED"):
                        await self._record(kind, obj, time.monotonic())

    async def _record(self, kind: str, obj: Object, at: float) -> None:
        meta = obj["metadata"]
        if kind == "MemoryCortex":
            cortex = meta["name"]
            status = obj.get("status") or {}
            if status.get("observedGeneration") == meta.get("generation"):
                self.observed.setdefault(cortex, at)
            if any(c.get("type") == "Ready" and c.get("status") == "True"
                   for c in status.get("conditions") or []):
                self.ready.add(cortex)
            else:
                self.ready.discard(cortex)
        else:
            cortex = (meta.get("labels") or {}).get(n.INSTANCE_LABEL, "")
            self.seen.setdefault((kind, meta["name"]), at)
        if cortex not in self.done:  # only the cortex this event is about: 200 stay cheap
            times = [self.seen.get(child) for child in children(self.namespace, cortex)]
            status_at = self.observed.get(cortex)
            if status_at is not None and all(t is not None for t in times):
                self.done[cortex] = (max(t for t in times if t is not None), status_at)
        async with self.changed:
            self.changed.notify_all()

    def done_at(self, cortex: str) -> tuple[float, float] | None:
        """(last child seen, status observed) for ``cortex``, once both happened."""
        return self.done.get(cortex)

    def missing(self, cortex: str) -> list[str]:
        """What ``cortex`` still lacks (for the message of a timeout)."""
        lacking = [f"{kind}/{name}" for kind, name in children(self.namespace, cortex)
                   if (kind, name) not in self.seen]
        return lacking + ([] if cortex in self.observed else ["current status"])

    def is_done(self, cortexes: list[str]) -> bool:
        return all(name in self.done for name in cortexes)

    async def wait(self, cortexes: str, predicate: Callable[[], bool], seconds: float) -> None:
        """Until ``predicate`` holds, re-checked on every watch event; bounded.

        ``cortexes`` (comma-separated) are named with what they lack if time runs out.
        """
        try:
            async with asyncio.timeout(seconds), self.changed:
                await self.changed.wait_for(predicate)
        except TimeoutError:
            lacking = [f"{name}: {self.missing(name)}" for name in cortexes.split(",")
                       if name not in self.done]
            raise TimeoutError(f"not within {seconds}s: {lacking[:5]}") from None

    async def close(self) -> None:
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


@dataclass
class Operator:
    """A ``cortexctl operator`` subprocess and its endpoints."""

    process: subprocess.Popen[bytes]
    metrics: int
    health: int
    log: Path
    started: float

    async def counters(self, session: aiohttp.ClientSession) -> dict[str, float]:
        """Every ``cortex_operator_*_total`` series, keyed ``name{labels}``."""
        async with session.get(f"http://127.0.0.1:{self.metrics}/metrics") as reply:
            text = await reply.text()
        return {f"{m[1]}{{{m[2]}}}": float(m[3]) for m in METRIC.finditer(text)}

    def memory_mb(self) -> dict[str, float]:
        """VmRSS and VmHWM (peak RSS) of the operator process, in MB."""
        fields = dict(line.split(":", 1) for line in
                      Path(f"/proc/{self.process.pid}/status").read_text().splitlines()
                      if ":" in line)
        return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}

    def cpu_s(self) -> float:
        """User + system CPU seconds the operator process has used."""
        stat = Path(f"/proc/{self.process.pid}/stat").read_text().rpartition(")")[2].split()
        return round((int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"), 2)


def cpu_snapshot() -> dict[str, float]:
    """CPU seconds so far of the bench's child processes by command (the control plane's and
    the operator's), plus ``machine_busy``: all CPUs' non-idle seconds, everyone's work."""
    tick, me = os.sysconf("SC_CLK_TCK"), os.getpid()
    out: dict[str, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            fields = text.rpartition(")")[2].split()
            if int(fields[1]) == me:  # fields[1] is the parent pid
                name = text[text.index("(") + 1:text.rindex(")")]
                out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    jiffies = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    out["machine_busy"] = (sum(jiffies) - jiffies[3] - jiffies[4]) / tick  # minus idle, iowait
    return out


def cpu_used(before: dict[str, float], seconds: float) -> dict[str, Any]:
    """CPU seconds each process used since ``before``, and the machine's busy cores."""
    after = cpu_snapshot()
    used = {k: round(v - before.get(k, 0.0), 1) for k, v in sorted(after.items())
            if k != "machine_busy" and v - before.get(k, 0.0) >= 0.05}
    busy = (after["machine_busy"] - before["machine_busy"]) / seconds
    return {"cpu_s_by_process": used, "machine_busy_cores": round(busy, 2),
            "window_s": round(seconds, 1)}


def writes(counters: dict[str, float]) -> float:
    return sum(v for k, v in counters.items() if k.startswith("cortex_operator_api_writes"))


def passes(counters: dict[str, float]) -> float:
    return sum(v for k, v in counters.items() if k.startswith("cortex_operator_reconciles"))


def delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items())
            if v - before.get(k, 0.0)}


def start_operator(namespace: str, kubeconfig: Path, release: str, log: Path) -> Operator:
    """Launch (not wait for) the operator; ``started`` is taken just before the exec."""
    health, metrics = free_port(), free_port()
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1",
           "ATTESTED_CORTEX_TOKENREVIEW_CLUSTERROLE": f"{release}-attested-cortex-tokenreviewer"}
    with log.open("ab") as sink:
        started = time.monotonic()
        process = subprocess.Popen(
            [*CORTEXCTL, "operator", "--namespace", namespace,
             "--health-listen", f"127.0.0.1:{health}", "--metrics-listen", f"127.0.0.1:{metrics}"],
            stdout=sink, stderr=subprocess.STDOUT, env=env)
    return Operator(process, metrics, health, log, started)


async def wait_ready(op: Operator, session: aiohttp.ClientSession, seconds: float = 120) -> float:
    """Seconds from exec to ``/readyz`` answering 200 (bounded poll)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if op.process.poll() is not None:
            raise RuntimeError(f"operator exited {op.process.returncode}:\n"
                               f"{op.log.read_text()[-3000:]}")
        with contextlib.suppress(aiohttp.ClientError, OSError):
            async with session.get(f"http://127.0.0.1:{op.health}/readyz") as reply:
                if reply.status == 200:
                    return round(time.monotonic() - op.started, 2)
        await asyncio.sleep(0.05)  # the interval of a bounded poll
    raise TimeoutError(f"operator not ready within {seconds}s:\n{op.log.read_text()[-3000:]}")


async def settle(op: Operator, session: aiohttp.ClientSession) -> dict[str, Any]:
    """Wait until the write counter has not moved for SETTLE_QUIET_S (bounded)."""
    began = time.monotonic()
    last, quiet_since = writes(await op.counters(session)), time.monotonic()
    while time.monotonic() - began < SETTLE_MAX_S:
        await asyncio.sleep(1.0)  # sampling interval of the counter
        now = writes(await op.counters(session))
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= SETTLE_QUIET_S:
            return {"settled": True, "waited_s": round(time.monotonic() - began, 1)}
    return {"settled": False, "waited_s": round(time.monotonic() - began, 1)}


async def idle_window(op: Operator, session: aiohttp.ClientSession,
                      seconds: float) -> dict[str, Any]:
    """Let the operator settle, then count what it writes during ``seconds`` of idleness."""
    settled = await settle(op, session)
    before = await op.counters(session)
    await asyncio.sleep(seconds)  # the measurement window itself
    after = await op.counters(session)
    idle_writes = writes(after) - writes(before)
    return {"settle": settled, "window_s": seconds, "writes": idle_writes,
            "writes_per_minute": round(idle_writes * 60 / seconds, 2),
            "counter_deltas": delta(after, before)}


def _level(line: str) -> str:
    """The level of one log line: JSON lines (the operator's format) or plain text."""
    with contextlib.suppress(ValueError, AttributeError):
        return str(json.loads(line).get("level", "")).upper()
    return next((level for level in ("ERROR", "WARNING") if level in line), "")


def log_summary(log: Path) -> dict[str, Any]:
    """Counts of error and warning lines in the operator's log, and the first few of each."""
    lines = log.read_text(errors="replace").splitlines()
    errors = [line for line in lines if _level(line) in ("ERROR", "CRITICAL")]
    warnings = [line for line in lines if _level(line) == "WARNING"]
    return {"lines": len(lines), "error_lines": len(errors), "warning_lines": len(warnings),
            "first_errors": [line[:400] for line in errors[:3]],
            "first_warnings": [line[:400] for line in warnings[:3]]}


@dataclass
class Cluster:
    """The control plane, the bench's admin session and its helpers."""

    kube: Kube
    session: aiohttp.ClientSession
    workdir: Path

    def prepare(self, namespace: str) -> tuple[str, Path]:
        """Namespace + chart (CRDs, RBAC; operator off); a token kubeconfig of its SA."""
        self.kube.kubectl("create", "namespace", namespace)
        release = f"b{namespace.rpartition('-')[2]}"
        install(self.kube, release, namespace, "operator.enabled=false")
        account = f"{release}-attested-cortex"
        token = self.kube.kubectl("create", "token", account, "-n", namespace,
                                  "--duration=6h").stdout.strip()
        admin = json.loads(self.kube.kubeconfig.read_text())
        cluster = admin["clusters"][0]
        config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
                  "users": [{"name": account, "user": {"token": token}}],
                  "contexts": [{"name": "operator", "context": {"cluster": cluster["name"],
                                                                "user": account}}],
                  "current-context": "operator"}
        path = self.workdir / f"{namespace}.kubeconfig"
        path.touch(mode=0o600)
        path.write_text(json.dumps(config))
        return release, path

    async def create(self, namespace: str, name: str) -> None:
        url = self.kube.server + CR_PATH.format(ns=namespace)
        async with self.session.post(url, json=memory_cortex(name)) as reply:
            if reply.status >= 300:
                raise RuntimeError(f"create {name}: {reply.status} {await reply.text()}")

    async def delete_namespace(self, namespace: str, seconds: float = 180) -> None:
        """Delete and wait until it is gone, so its objects do not load the next phase."""
        url = f"{self.kube.server}/api/v1/namespaces/{namespace}"
        async with self.session.delete(url) as reply:
            reply.raise_for_status()
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            async with self.session.get(url) as reply:
                if reply.status == 404:
                    return
            await asyncio.sleep(0.5)  # the interval of a bounded poll
        print(f"namespace {namespace} still terminating after {seconds}s", file=sys.stderr)

    async def observer(self, namespace: str) -> Observer:
        observer = Observer(self.session, self.kube.server, namespace)
        await observer.start()
        return observer


async def steady(cluster: Cluster, count: int, idle_s: float) -> dict[str, Any]:
    """``count`` cortexes created one after another, each once the previous one is done."""
    namespace = f"opbench-{uuid.uuid4().hex[:8]}"
    release, kubeconfig = cluster.prepare(namespace)
    observer = await cluster.observer(namespace)
    op = start_operator(namespace, kubeconfig, release, cluster.workdir / "steady.log")
    try:
        ready_s = await wait_ready(op, cluster.session)
        children_ms, status_ms, request_ms, warmup = [], [], [], {}
        per_child: dict[str, list[float]] = {}
        for index in range(-1, count):  # -1: a warm-up cortex, not counted
            name = f"steady-{index:03d}" if index >= 0 else "steady-warmup"
            began = time.monotonic()
            await cluster.create(namespace, name)
            request_ms.append((time.monotonic() - began) * 1000)
            await observer.wait(name, partial(observer.is_done, [name]),
                                WAIT_ONE_S if index >= 0 else COLD_MAX_S)
            done = observer.done_at(name)
            assert done is not None
            if index < 0:
                warmup = {"children_created_s": round(done[0] - began, 2),
                          "status_observed_s": round(done[1] - began, 2),
                          "since_operator_exec_s": round(done[0] - op.started, 2)}
                continue
            children_ms.append((done[0] - began) * 1000)
            status_ms.append((done[1] - began) * 1000)
            for kind, child in children(namespace, name):
                label = f"{kind} {child.replace(namespace, '<ns>').replace(name, '<c>')}"
                per_child.setdefault(label, []).append(
                    (observer.seen[(kind, child)] - began) * 1000)
        counters = await op.counters(cluster.session)
        idle = await idle_window(op, cluster.session, idle_s)
        return {
            "cortexes": count, "operator_ready_s": ready_s, "warmup_cortex": warmup,
            "children_created_ms": percentiles(children_ms),
            "status_observed_ms": percentiles(status_ms),
            "create_request_ms": percentiles(request_ms[1:]),
            "per_child_p50_ms": {k: round(statistics.median(v), 1)
                                 for k, v in sorted(per_child.items())},
            "operator_writes": writes(counters), "operator_passes": passes(counters),
            "cortexes_ready_before_idle": len(observer.ready),
            "idle": idle,
            "rss_mb": op.memory_mb()["VmRSS"],
            "operator_log": log_summary(op.log),
        }
    except BaseException:
        print(f"operator log ends:\n{op.log.read_text(errors='replace')[-4000:]}",
              file=sys.stderr)
        raise
    finally:
        await observer.close()
        stop(op.process)
        await cluster.delete_namespace(namespace)


async def cold(cluster: Cluster, count: int, idle_s: float) -> dict[str, Any]:
    """``count`` cortexes created with no operator; start it; time, RSS, idle writes."""
    namespace = f"opbench-{uuid.uuid4().hex[:8]}"
    release, kubeconfig = cluster.prepare(namespace)
    observer = await cluster.observer(namespace)
    names = [f"cold-{index:03d}" for index in range(count)]
    gate = asyncio.Semaphore(8)

    async def create(name: str) -> None:
        async with gate:
            await cluster.create(namespace, name)

    await asyncio.gather(*(create(name) for name in names))
    cpu_before = cpu_snapshot()
    op = start_operator(namespace, kubeconfig, release, cluster.workdir / "cold.log")
    try:
        ready_s = await wait_ready(op, cluster.session)
        await observer.wait(",".join(names), partial(observer.is_done, names), COLD_MAX_S)
        finished = [observer.done_at(x) for x in names]
        all_done = max(max(d) for d in finished if d is not None)
        reconciled_s = round(all_done - op.started, 2)
        cpu_at_done = op.cpu_s()
        cpu_window = cpu_used(cpu_before, time.monotonic() - op.started)
        memory_at_done = op.memory_mb()
        counters_done = await op.counters(cluster.session)
        idle = await idle_window(op, cluster.session, idle_s)
        memory_idle = op.memory_mb()
        return {
            "cortexes": count, "operator_ready_s": ready_s,
            "all_reconciled_s": reconciled_s,
            "per_cortex_done_s": {k: round(v / 1000, 2) for k, v in percentiles(
                [(max(d) - op.started) * 1000 for d in finished if d is not None]).items()
                if k != "n"},
            "operator_cpu_s_until_reconciled": cpu_at_done,
            "cpu_until_reconciled": cpu_window,
            "writes_until_reconciled": writes(counters_done),
            "passes_until_reconciled": passes(counters_done),
            "counters_until_reconciled": delta(counters_done, {}),
            "rss_mb_all_reconciled": memory_at_done["VmRSS"],
            "rss_mb_after_idle": memory_idle["VmRSS"],
            "rss_mb_peak": memory_idle["VmHWM"],
            "cortexes_ready_before_idle": len(observer.ready),
            "idle": idle,
            "operator_cpu_s_total": op.cpu_s(),
            "operator_log": log_summary(op.log),
        }
    except BaseException:
        print(f"operator log ends:\n{op.log.read_text(errors='replace')[-4000:]}",
              file=sys.stderr)
        raise
    finally:
        await observer.close()
        stop(op.process)


@contextlib.contextmanager
def control_plane(workdir: Path) -> Iterator[Kube]:
    bin_dir = binaries.bin_dir()
    missing = binaries.missing(bin_dir)
    if missing:
        raise SystemExit(f"Kubernetes binaries missing from {bin_dir}: {missing}; run make deps")
    with ControlPlane(bin_dir=bin_dir) as plane:
        home = workdir / "clients"
        home.mkdir()
        yield Kube(kubeconfig=plane.kubeconfig, bin_dir=plane.bin_dir, server=plane.server,
                   home=home, volume_directory=plane.volume_directory)


async def run(kube: Kube, workdir: Path, *, steady_count: int, cold_count: int,
              idle_s: float) -> dict[str, Any]:
    connector = aiohttp.TCPConnector(ssl=ssl_context(from_kubeconfig(kube.kubeconfig)),
                                     limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     read_bufsize=2**22) as session:
        cluster = Cluster(kube, session, workdir)
        load = [round(x, 2) for x in os.getloadavg()]
        first = await steady(cluster, steady_count, idle_s)
        second = await cold(cluster, cold_count, idle_s)
    return {"load_average_at_start": load,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
            "steady": first, "cold_start": second}


DEFINITIONS = {
    "children_created_ms": (
        "per MemoryCortex, created one after another with the operator running and idle "
        "(the next is created once the previous has all its children and its status): from "
        "just before the bench sends the create request to the moment the last of its "
        "immediate children is seen by the bench's watches: credentials Secret, StatefulSet, "
        "headless Service, NetworkPolicy, ConfigMap, approval HMAC Secret, ServiceAccount, "
        "Service and ClusterRoleBinding (spec: examples/cortex/memorycortex.yaml). Watch "
        "delivery on loopback adds a few ms."),
    "status_observed_ms": (
        "same start, to the first watch event of the MemoryCortex with "
        "status.observedGeneration == metadata.generation"),
    "all_reconciled_s": (
        "cold start: N MemoryCortex created while no operator runs; from just before the "
        "operator process is exec'd (Python start-up, kopf's initial listing included) until "
        "every one has status.observedGeneration == metadata.generation and all its "
        "immediate children exist"),
    "rss_mb": ("VmRSS of the operator process from /proc/<pid>/status: when all N were "
               "reconciled (rss_mb_all_reconciled) and after the idle window "
               "(rss_mb_after_idle); rss_mb_peak is VmHWM, the peak of the whole run"),
    "idle": (
        "delta of cortex_operator_api_writes_total (every write request the operator sends) "
        "over a window of window_s seconds that starts once every cortex is reconciled and the "
        f"counter has not moved for {SETTLE_QUIET_S:.0f} s (settle.waited_s; settled false if "
        f"it kept moving for {SETTLE_MAX_S:.0f} s); writes_per_minute scales it to 60 s. "
        "Measured twice: after the steady phase (cortexes of which the first ones got a "
        "volume and went on to Ready) and after the cold start"),
    "create_request_ms": (
        "round trip of the bench's own create request (admin, POST of the MemoryCortex): "
        "what one API request costs on this machine at the time"),
    "per_child_p50_ms": ("median time from the create request to each child's first watch "
                         "event: the order and pace of one reconcile pass"),
    "cpu_until_reconciled": (
        "cold start, from the operator's exec until all were reconciled: CPU seconds of each "
        "child process of the bench (control plane components by command name; the operator "
        "is 'python'), and machine_busy_cores: the average number of the machine's cores busy "
        "with anything (the machine is shared; other work runs on it)"),
    "warmup_cortex": (
        "the first cortex after the steady phase's operator started (not in the samples): "
        "includes kopf's start-up; since_operator_exec_s counts from the exec"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.operator")
    parser.add_argument("--steady", type=int, default=50, help="cortexes created one by one")
    parser.add_argument("--cold", type=int, default=200, help="cortexes for the cold start")
    parser.add_argument("--idle-s", type=float, default=60.0, help="idle window seconds")
    parser.add_argument("--keep-logs", type=Path, help="copy the operator logs here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="cortex-bench-op-") as tmp, \
            control_plane(Path(tmp)) as kube:
        os.environ["KUBECONFIG"] = str(kube.kubeconfig)
        try:
            result = asyncio.run(run(kube, Path(tmp), steady_count=args.steady,
                                     cold_count=args.cold, idle_s=args.idle_s))
        finally:
            if args.keep_logs:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    shutil.copy(log, args.keep_logs / log.name)
    result = {
        "setup": {
            "control_plane": "hack/k8s/localkube: etcd, kube-apiserver, controller-manager, "
                             "scheduler, one kwok fake node (pods are faked, not run)",
            "operator": "cortexctl operator --namespace NS as a subprocess of the bench",
            "operator_identity": "token of the chart's ServiceAccount (helm install, "
                                 "operator.enabled=false): the chart's RBAC, not admin",
            "operator_workers": WORKERS,
            "observer": "the bench, admin kubeconfig, one aiohttp watch per child kind",
            "cortex_spec": SPEC,
            "storage": "the control plane has 32 static volumes and no provisioner: the "
                       "first 32 database claims of the run bind (kwok runs those pods, their "
                       "migration Jobs succeed, the server Deployments come up), every later "
                       "claim stays Pending; the timed figures need only the immediate "
                       "children and the first current status",
        },
        "definitions": DEFINITIONS,
        **result,
        "goals": {"children_created_p95_ms": 1000, "cold_start_200_s": 60,
                  "rss_mb_200": 150, "idle_writes_per_minute": 0},
    }
    path = write_result("operator", result)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
