"""Our images as real pods on the real node: the database accepts connections, the server
migrates it, serves, stores and recalls; the chart's operator pod runs Ready.

Everything is reached from this host the way a user would: kubectl, and plain clients to the
Services' cluster IPs (kube-proxy's rules route them to the pods on the node's bridge).
"""

from __future__ import annotations

import json
import secrets
import urllib.request
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from hack.support.kube import POLL_INTERVAL_S
from hack.support.waiting import wait_until

from attested_cortex.server import tokens
from tests.realnode import manifests
from tests.support.realnode import RealCluster, repository_root

pytestmark = [pytest.mark.realnode, pytest.mark.slow]
READY_TIMEOUT = "110s"  # under the 120 s bound of every kubectl call


@pytest.fixture
def restricted_namespace(real_node: RealCluster) -> Iterator[str]:
    name = f"r-{uuid.uuid4().hex[:8]}"
    real_node.kubectl("apply", "-f", "-", input=manifests.as_input([manifests.namespace(name)]))
    yield name
    real_node.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _json(cluster: RealCluster, *args: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cluster.kubectl(*args, "-o", "json").stdout)
    return out


def _cluster_ip(cluster: RealCluster, namespace: str, service: str) -> str:
    spec = _json(cluster, "get", "service", service, "-n", namespace)["spec"]
    assert isinstance(spec, dict)
    return str(spec["clusterIP"])


def _wait_ready(cluster: RealCluster, namespace: str, pod: str) -> None:
    result = cluster.kubectl("wait", "-n", namespace, f"pod/{pod}", "--for=condition=Ready",
                             f"--timeout={READY_TIMEOUT}", check=False)
    if result.returncode != 0:
        described = cluster.kubectl("describe", "pod", pod, "-n", namespace, check=False).stdout
        logs = cluster.kubectl("logs", pod, "-n", namespace, "--all-containers", check=False)
        pytest.fail(f"pod {pod} not Ready: {result.stderr}\n{described}\n{logs.stdout}"
                    f"{logs.stderr}")


def _call(base: str, token: str, method: str, path: str,
          body: object = None) -> tuple[int, object]:
    """One request to the server through its Service, as the token's agent."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.status, json.loads(answer.read() or b"null")


def _connect_until_accepted(dsn: str, *,
                            seconds: float = 60) -> psycopg.Connection[tuple[object, ...]]:
    """The Service routes once the endpoint is published; a bounded retry on refusal."""
    return wait_until(lambda: psycopg.connect(dsn, connect_timeout=5),
                      what="a connection through the Service", seconds=seconds, interval_s=0.2,
                      ignoring=(psycopg.OperationalError,))


def test_database_and_server_pods_really_run(real_node: RealCluster,
                                             restricted_namespace: str) -> None:
    ns = restricted_namespace
    password = secrets.token_urlsafe(18)
    real_node.kubectl("apply", "-n", ns, "-f", "-",
                      input=manifests.as_input(manifests.database(ns, password)))
    _wait_ready(real_node, ns, "postgres")

    pod = _json(real_node, "get", "pod", "postgres", "-n", ns)
    assert pod["spec"]["nodeName"] == real_node.node_name  # type: ignore[index]
    claim = _json(real_node, "get", "pvc", "data", "-n", ns)
    assert claim["status"]["phase"] == "Bound"  # type: ignore[index]

    # PostgreSQL + AGE accepts connections from outside the cluster, through its Service.
    db_ip = _cluster_ip(real_node, ns, "postgres")
    with _connect_until_accepted(
            f"postgresql://postgres:{password}@{db_ip}:5432/cortex") as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'age'").fetchone()
        assert row is not None and str(row[0]).startswith("1.5")
        user = conn.execute("SELECT current_setting('data_directory')").fetchone()
        assert user == ("/var/lib/postgresql/data/pgdata",)

    # The server migrates (init container) and serves against it, found by DNS name.
    token, hashed = tokens.generate()  # the server refuses hand-chosen tokens' hashes
    real_node.kubectl("apply", "-n", ns, "-f", "-",
                      input=manifests.as_input(manifests.server(hashed, "agent:realnode")))
    _wait_ready(real_node, ns, "cortex")
    migrate_log = real_node.kubectl("logs", "cortex", "-n", ns, "-c", "migrate").stdout
    assert migrate_log.strip(), "the migration printed nothing"

    base = f"http://{_cluster_ip(real_node, ns, 'cortex')}:8080"
    status, stored = _call(base, token, "POST", "/v1/memories",
                           {"namespace": "realnode", "content": "pods really run on a node"})
    assert status == 201, stored
    status, recalled = _call(base, token, "POST", "/v1/recall", {"query": "pods run node"})
    assert status == 200
    assert isinstance(stored, dict) and isinstance(recalled, dict)
    assert stored["id"] in json.dumps(recalled)

    # The memory is in the pod's database, on the node's volume.
    with psycopg.connect(f"postgresql://postgres:{password}@{db_ip}:5432/cortex",
                         connect_timeout=5) as conn:
        count = conn.execute("SELECT count(*) FROM memories").fetchone()
        assert count is not None and count[0] >= 1


def _described(cluster: RealCluster, namespace: str) -> str:
    """What a failed assertion about the release shows: its pods and the operator's log."""
    pods = cluster.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
    logs = cluster.kubectl("logs", "-n", namespace, "-l", "app.kubernetes.io/instance=ac",
                           "--tail=40", check=False)
    return f"{pods}\n{logs.stdout}{logs.stderr}"


def test_helm_install_runs_the_operator_pod(real_node: RealCluster) -> None:
    ns = f"h-{uuid.uuid4().hex[:8]}"
    chart = repository_root() / "charts" / "attested-cortex"
    real_node.helm("install", "ac", str(chart), "-n", ns, "--create-namespace", "--wait",
                   f"--timeout={READY_TIMEOUT}")
    try:
        pods = _json(real_node, "get", "pods", "-n", ns, "-l",
                     "app.kubernetes.io/instance=ac")["items"]
        assert isinstance(pods, list) and len(pods) == 1, _described(real_node, ns)
        pod = pods[0]
        assert pod["spec"]["nodeName"] == real_node.node_name
        assert pod["status"]["phase"] == "Running", _described(real_node, ns)
        assert all(c["ready"] for c in pod["status"]["containerStatuses"]), \
            _described(real_node, ns)
        # From inside the operator's container: the API by its Service DNS name, verified the
        # way the operator's Python 3.13 verifies it (X509_STRICT) with its service account CA.
        probe = ("import json, ssl, urllib.request as u; c = ssl.create_default_context("
                 "cafile='/var/run/secrets/kubernetes.io/serviceaccount/ca.crt'); "
                 "print(json.load(u.urlopen('https://kubernetes.default.svc/version', "
                 "context=c, timeout=10))['gitVersion'])")
        name = pod["metadata"]["name"]
        seen: list[str] = []

        def probed() -> bool:  # exec right after Ready can meet a transient streaming error
            answer = real_node.kubectl("exec", "-n", ns, name, "--", "python", "-c", probe,
                                       check=False)
            seen.append(answer.stdout.strip() or answer.stderr.strip())
            return answer.returncode == 0

        wait_until(probed, what=f"kubectl exec into {name}", seconds=60, interval_s=POLL_INTERVAL_S)
        assert seen[-1] == "v1.34.4", seen

        def logged_ready() -> bool:
            return "operator ready" in real_node.kubectl("logs", "-n", ns, name).stdout

        wait_until(logged_ready, what="the operator's 'operator ready' log line", seconds=60,
                   interval_s=POLL_INTERVAL_S)
        logs = real_node.kubectl("logs", "-n", ns, name).stdout
        assert "CERTIFICATE_VERIFY_FAILED" not in logs
    finally:
        real_node.helm("uninstall", "ac", "-n", ns, "--wait", check=False)
        real_node.kubectl("delete", "namespace", ns, "--wait=false", check=False)
