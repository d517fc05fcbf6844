"""Fixtures for the operator's tests on the real control plane (kwok nodes).

``operated`` installs the chart into a fresh namespace (CRDs, ServiceAccount, RBAC; the
chart's own operator pod is off), mints a token for the chart's ServiceAccount and runs
``cortexctl operator`` as a real process with exactly that identity, so every test runs
with the permissions the chart grants. Tests create custom resources with kubectl and wait
on conditions with bounded polls.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from hack.support.chart import install
from hack.support.kube import Kube
from hack.support.served import CORTEXCTL, free_port, stop, wait_until_up
from hack.support.waiting import wait_until

from attested_cortex import crd

T = TypeVar("T")
#: Managed databases one module may bind (the most a module makes is 8 cortexes).
VOLUMES_PER_MODULE = 12
Object = dict[str, Any]
KINDS = {kind.kind: kind.crd_name for kind in crd.KINDS}


@dataclass
class OperatorProcess:
    """A running ``cortexctl operator``."""

    process: subprocess.Popen[bytes]
    metrics: int
    log: Path

    def writes(self) -> float:
        """Write requests the operator has sent to the API server."""
        return self.metric("cortex_operator_api_writes_total")

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a counter's samples whose labels include ``labels``."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics",
                                    timeout=5) as reply:
            text = reply.read().decode()
        total = 0.0
        for match in re.finditer(rf"^{name}\{{([^}}]*)\}} ([0-9.e+]+)$", text, re.M):
            found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
            if labels.items() <= found.items():
                total += float(match.group(2))
        return total

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@dataclass
class Operated:
    """A namespace with the chart installed and an operator process acting as its SA."""

    kube: Kube
    namespace: str
    kubeconfig: Path
    workdir: Path
    running: list[OperatorProcess] = field(default_factory=list)

    def start(self) -> OperatorProcess:
        run = start_operator(self.namespace, self.kubeconfig,
                             self.workdir / f"operator-{len(self.running)}.log",
                             tokenreview_role=f"{self.release}-attested-cortex-tokenreviewer")
        self.running.append(run)
        return run

    @property
    def release(self) -> str:
        return f"op{self.namespace.rpartition('-')[2]}"

    def stop_all(self) -> None:
        for run in self.running:
            stop(run.process)

    def kubectl(self, *args: str, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.kube.kubectl("-n", self.namespace, *args, input=input, check=check)

    def apply(self, *documents: Object) -> None:
        text = "\n---\n".join(yaml.safe_dump(d) for d in documents)
        self.kubectl("apply", "-f", "-", input=text)

    def get(self, kind: str, name: str) -> Object | None:
        result = self.kubectl("get", KINDS.get(kind, kind), name, "-o", "json", check=False)
        if result.returncode != 0:
            if "NotFound" in result.stderr:
                return None
            raise AssertionError(result.stderr)
        loaded: Object = json.loads(result.stdout)
        return loaded

    def condition(self, kind: str, name: str, type_: str) -> Object | None:
        obj = self.get(kind, name) or {}
        return next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c["type"] == type_), None)

    def wait_condition(self, kind: str, name: str, type_: str, status: str = "True", *,
                       reason: str | None = None, seconds: float = 90) -> Object:
        def probe() -> Object | None:
            cond = self.condition(kind, name, type_)
            if cond and cond["status"] == status and (reason is None or cond["reason"] == reason):
                return cond
            return None
        return wait_until(probe, what=f"{kind}/{name} {type_}={status} {reason or ''}",
                          seconds=seconds, interval_s=0.2)


def start_operator(namespace: str, kubeconfig: Path, log: Path, *,
                   tokenreview_role: str = "attested-cortex-tokenreviewer") -> OperatorProcess:
    """``cortexctl operator --namespace NS`` as ``kubeconfig``'s user, ready when returned."""
    health, metrics = free_port(), free_port()
    with log.open("ab") as sink:
        process = subprocess.Popen(
            [*CORTEXCTL, "operator", "--namespace", namespace,
             "--health-listen", f"127.0.0.1:{health}", "--metrics-listen", f"127.0.0.1:{metrics}"],
            stdout=sink, stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1",
                 "ATTESTED_CORTEX_TOKENREVIEW_CLUSTERROLE": tokenreview_role})
    run = OperatorProcess(process, metrics, log)
    try:
        wait_until_up(f"http://127.0.0.1:{health}/readyz", process, seconds=60)
    except (RuntimeError, TimeoutError) as exc:
        stop(process)
        raise AssertionError(f"operator did not start: {exc}\n{log.read_text()[-3000:]}") from exc
    return run


def _token_kubeconfig(kube: Kube, namespace: str, account: str, path: Path) -> Path:
    token = kube.kubectl("create", "token", account, "-n", namespace,
                         "--duration=6h").stdout.strip()
    admin = json.loads(kube.kubeconfig.read_text())
    cluster = admin["clusters"][0]
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster],
              "users": [{"name": account, "user": {"token": token}}],
              "contexts": [{"name": "operator", "context": {"cluster": cluster["name"],
                                                            "user": account}}],
              "current-context": "operator"}
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def operated(kube: Kube, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operated]:
    """The chart's RBAC and a real operator process in a fresh namespace (module-wide)."""
    namespace = f"op-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", namespace)
    release = f"op{namespace.rpartition('-')[2]}"
    # Claims of deleted cortexes stay Released (Retain): without volumes of its own a module
    # late in the run found the cluster's 32 all used, its database Pending for ever.
    kube.add_volumes(VOLUMES_PER_MODULE)
    install(kube, release, namespace, "operator.enabled=false")
    workdir = tmp_path_factory.mktemp("operator")
    kubeconfig = _token_kubeconfig(kube, namespace, f"{release}-attested-cortex",
                                   workdir / "kubeconfig")
    env = Operated(kube=kube, namespace=namespace, kubeconfig=kubeconfig, workdir=workdir)
    try:
        yield env
    finally:
        env.stop_all()
        kube.helm("uninstall", release, "-n", namespace, check=False)
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(operated: Operated) -> OperatorProcess:
    """One operator process for the module."""
    return operated.start()


def cortex(name: str, **spec: Any) -> Object:
    """A MemoryCortex with a managed database unless ``database`` is given."""
    body = {"database": {"managed": {"storage": {"size": "1Gi"}}}, **spec}
    return {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "MemoryCortex",
            "metadata": {"name": name}, "spec": body}


def satellite(kind: str, name: str, cortex_name: str, **spec: Any) -> Object:
    return {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name}, "spec": {"cortexRef": {"name": cortex_name}, **spec}}
