"""The whole system on a real cluster: the chart's operator (a real pod) turns a MemoryCortex,
three AgentIdentities, a HookChain and PermissionRules into a database, a migration, a server
with a hook sidecar and keys; everything is then exercised from outside the cluster through a
``kubectl port-forward`` of the cortex Service with a plain HTTP client, as an agent with a
minted service-account token would.

The tests run in file order and share the cortex (module scope): resources Ready, stores and
recalls, the cortex's trust ceiling capping an Untrusted agent, hooks and rules, signed
links, server and database pod deletions, a ``helm upgrade`` and, last, ``helm uninstall``.
Runs last in e2e/ (the uninstall ends the release).
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from hack.support.waiting import wait_until
from nacl.signing import VerifyKey

from attested_cortex.attest.keys import key_from_seed, seed_from_pem
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId
from e2e import manifests
from e2e.conftest import CHART, IMAGE_VALUES, RELEASE, TARGET, helm, kubectl, kubectl_json
from e2e.manifests import CORTEX, DENY_MARK, PLANNER, RESEARCHER, SCOUT, SCOUT_CEILING

WAIT = "150s"
KINDS = ("memorycortex", "agentidentity", "hookchain", "permissionrule")
METRIC = re.compile(r'^cortex_hook_fires_total\{event="(\w+)",hook="([\w-]+)"\} ([0-9.e+]+)$',
                    re.M)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


class Forward:
    """``kubectl port-forward`` of the cortex Service to a free port on 127.0.0.1."""

    def __init__(self, namespace: str, service: str = CORTEX) -> None:
        self.namespace = namespace
        self.service = service
        self.process: subprocess.Popen[str] | None = None
        self.base = ""

    def start(self) -> None:
        self.stop()
        self.process = subprocess.Popen(
            ["kubectl", "port-forward", "-n", self.namespace, f"svc/{self.service}", "0:8080",
             "--address", "127.0.0.1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=TARGET.env())
        assert self.process.stdout is not None
        line = self.process.stdout.readline()  # bounded: kubectl exits on failure
        found = re.search(r"127\.0\.0\.1:(\d+)", line)
        assert found, f"port-forward said: {line}"
        self.base = f"http://127.0.0.1:{found.group(1)}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None


class Agent:
    """An agent calling the cortex with its minted service-account token."""

    def __init__(self, forward: Forward, namespace: str, account: str) -> None:
        self.forward = forward
        self.token = ok(kubectl("create", "token", account, "-n", namespace,
                                "--duration", "2h")).strip()

    def call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 (http://127.0.0.1 of the forward)
            self.forward.base + path, data=data, method=method,
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(request, timeout=15) as answer:  # noqa: S310
                return answer.status, json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def store(self, namespace: str, content: str) -> dict[str, Any]:
        status, body = self.call("POST", "/v1/memories",
                                 {"namespace": namespace, "content": content})
        assert status == 201, body
        return dict(body)


@pytest.fixture(scope="module")
def cortex(namespace: str) -> Iterator[str]:
    """The e2e resources applied in the release namespace."""
    ok(kubectl("apply", "-f", "-", input=manifests.as_input(manifests.resources(namespace))))
    yield namespace


@pytest.fixture(scope="module")
def forward(cortex: str) -> Iterator[Forward]:
    ready = kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
                    f"memorycortex/{CORTEX}")
    if ready.returncode != 0:
        pytest.fail(f"{CORTEX} not Ready: {ready.stderr}\n" + kubectl(
            "get", "-n", cortex, "mcx,pods,jobs", "-o", "wide").stdout)
    forwarding = Forward(cortex)
    forwarding.start()
    yield forwarding
    forwarding.stop()


@pytest.fixture(scope="module")
def planner(forward: Forward, cortex: str) -> Agent:
    return Agent(forward, cortex, PLANNER)


@pytest.fixture(scope="module")
def researcher(forward: Forward, cortex: str) -> Agent:
    return Agent(forward, cortex, RESEARCHER)


@pytest.fixture(scope="module")
def scout(forward: Forward, cortex: str) -> Agent:
    return Agent(forward, cortex, SCOUT)


@pytest.fixture(scope="module")
def written() -> list[str]:
    """Ids of every acknowledged store of the module, checked after each disruption."""
    return []


def _fires(forward: Forward) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(forward.base + "/metrics", timeout=15) as answer:  # noqa: S310
        text = answer.read().decode()
    return {(event, hook): float(value) for event, hook, value in METRIC.findall(text)}


def _all_there(agent: Agent, ids: list[str]) -> bool:
    for memory_id in ids:
        try:
            status, body = agent.call("GET", f"/v1/memories/{memory_id}")
        except OSError:
            return False
        if status != 200 or body["id"] != memory_id:
            return False
    return True


def _applied(namespace: str) -> list[tuple[str, str]]:
    """(kind, name) of every custom resource this module applied."""
    return [(item["kind"].lower(), item["metadata"]["name"])
            for item in manifests.resources(namespace) if item["kind"].lower() in KINDS]


def test_every_resource_becomes_ready_and_the_pods_really_ran(forward: Forward,
                                                              cortex: str) -> None:
    # By name: other e2e modules share the release namespace and may leave cortexes of their
    # own there (being deleted, or deliberately not Ready); ``--all`` would wait on those too.
    for kind, name in _applied(cortex):
        ok(kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
                   f"{kind}/{name}"))
    ok(kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
               f"pod/{CORTEX}-db-0"))
    jobs = kubectl_json("get", "jobs", "-n", cortex, "-l",
                        f"app.kubernetes.io/instance={CORTEX}")["items"]
    assert jobs, "no migration Job"
    job = jobs[0]["metadata"]["name"]
    ok(kubectl("wait", "-n", cortex, "--for=condition=Complete", f"--timeout={WAIT}",
               f"job/{job}"))
    assert "schema version 0 -> " in ok(kubectl("logs", "-n", cortex, f"job/{job}"))
    pods = kubectl_json("get", "pods", "-n", cortex, "-l",
                        f"app.kubernetes.io/instance={CORTEX},app.kubernetes.io/component=server")
    assert pods["items"]
    for pod in pods["items"]:
        assert pod["status"]["phase"] == "Running"
        assert all(c["ready"] for c in pod["status"]["containerStatuses"]), pod["status"]
        assert {c["name"] for c in pod["spec"]["containers"]} == {"server", "hook-auto-link"}


def test_store_and_recall(planner: Agent, researcher: Agent, written: list[str]) -> None:
    stored = planner.store("team/ops", "nightly backups of the billing database run at 02:00")
    written.append(stored["id"])
    assert stored["author"].endswith(f"/{PLANNER}")
    status, found = researcher.call("POST", "/v1/recall",
                                    {"query": "billing database backups", "namespace": "team/ops"})
    assert status == 200 and stored["id"] in [r["id"] for r in found["results"]]


def test_the_cortex_trust_ceiling_reaches_the_deployed_server(scout: Agent) -> None:
    """spec.trust.ceilings of the MemoryCortex, through the operator's config, as the server
    pod enforces it: the Untrusted scout holds memory.read in team/ops and team/plans; the
    cortex's ceiling (not the default, qualified:public/**, which would leave it nothing) keeps
    team/ops and caps team/plans with a 403 naming tier, scope and mark."""
    status, caps = scout.call("GET", "/v1/capabilities")
    assert status == 200, caps
    assert caps["trust"]["ceilings"]["Untrusted"]["memory.read"] == SCOUT_CEILING
    assert caps["trust"]["you"] == {
        "tier": "Untrusted", "effective_scopes": ["memory.read:team/ops/**"],
        "held_scopes": ["memory.read:team/ops/**", "memory.read:team/plans/**"]}, caps["trust"]
    status, body = scout.call("POST", "/v1/recall", {"query": "cache", "namespace": "team/plans"})
    assert status == 403 and body["error"]["code"] == "trust_ceiling", body
    assert {k: body["error"]["details"][k] for k in ("tier", "scope", "mark")} == {
        "tier": "Untrusted", "scope": "memory.read", "mark": SCOUT_CEILING}, body


def test_the_hooks_fire(forward: Forward, planner: Agent, written: list[str]) -> None:
    before = _fires(forward)
    stored = planner.store("team/ops", "billing database backups run nightly at 02:00 UTC")
    written.append(stored["id"])
    wait_until(lambda: _fires(forward).get(("post_store", "auto-link"), 0)
               > before.get(("post_store", "auto-link"), 0), what="the daemon hook's counter",
               seconds=120, interval_s=0.5)
    after = _fires(forward)
    assert after[("pre_store", "deny-marked")] > before.get(("pre_store", "deny-marked"), 0)
    status, body = planner.call("POST", "/v1/memories",
                                {"namespace": "team/ops", "content": f"please {DENY_MARK}"})
    assert status == 403, body
    # The sidecar did its work with the pod's own token: a related_to link to the first note.
    wait_until(lambda: bool(planner.call("GET", f"/v1/memories/{stored['id']}/links")[1]
                            .get("links")), what="the auto-link sidecar's link", seconds=120,
               interval_s=0.5)


def test_a_rule_decides(planner: Agent) -> None:
    status, body = planner.call("POST", "/v1/memories",
                                {"namespace": "secrets/db", "content": "hunter2"})
    assert status == 403 and body["error"]["code"] == "rule_deny", body
    status, _ = planner.call("POST", "/v1/recall", {"query": "hunter2", "namespace": "secrets/db"})
    assert status == 403


def _server_ready(namespace: str) -> dict[str, str]:
    conditions = kubectl_json("get", f"memorycortex/{CORTEX}", "-n", namespace)["status"][
        "conditions"]
    return next(c for c in conditions if c["type"] == "ServerReady")


def test_a_sidecar_that_cannot_run_is_named_and_the_old_pod_keeps_serving(
        cortex: str, forward: Forward, planner: Agent, written: list[str]) -> None:
    """A Daemon hook whose container exits: the rollout never completes, ServerReady says
    which container of which pod, the old pod answers all along; removing the hook heals."""
    crashing = {"apiVersion": "cortex.attested.dev/v1alpha1", "kind": "HookChain",
                "metadata": {"name": "crashing", "namespace": cortex},
                "spec": {"cortexRef": {"name": CORTEX}, "hooks": [{
                    "name": "crasher", "mode": "Daemon", "events": ["post_store"],
                    "failMode": "Open", "timeoutMs": 500,
                    "sidecar": {"image": manifests.SERVER_IMAGE,
                                "command": ["sh", "-c", "exit 3"]}}]}}
    ok(kubectl("apply", "-f", "-", input=json.dumps(crashing)))
    wait_until(lambda: _server_ready(cortex)["reason"] == "ServerPodsFailing",
               what="ServerReady=False (ServerPodsFailing)", seconds=120, interval_s=0.5)
    message = _server_ready(cortex)["message"]
    assert "container hook-crasher of pod" in message and "exit code 3" in message, message
    assert "still running" in message
    wait_until(lambda: next(c for c in kubectl_json("get", "hookchain/crashing", "-n", cortex)[
        "status"]["conditions"] if c["type"] == "Ready")["reason"] == "NotRunning",
               what="HookChain Ready=False (NotRunning): accepted is not running", seconds=120,
               interval_s=0.5)
    written.append(planner.store("team/ops", "stored while a rollout was failing")["id"])
    ok(kubectl("delete", "hookchain/crashing", "-n", cortex))
    ready = kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
                    f"memorycortex/{CORTEX}")
    assert ready.returncode == 0, _server_ready(cortex)
    ok(kubectl("rollout", "status", "-n", cortex, f"deployment/{CORTEX}-server",
               f"--timeout={WAIT}"))
    forward.start()  # the forward ended with the pod it pointed at
    wait_until(lambda: _all_there(planner, written), what="every acknowledged write", seconds=120,
               interval_s=0.5)


def verify_link(public_key: bytes, link: dict[str, Any]) -> None:
    """A link's signature checked with PyNaCl over the payload rebuilt from its fields."""
    until = link.get("valid_until")
    payload = link_payload(
        src_id=link["src_id"], dst_id=link["dst_id"], relation=link["relation"],
        observed_by=link["observed_by"], valid_from=datetime.fromisoformat(link["valid_from"]),
        valid_until=None if until is None else datetime.fromisoformat(until))
    VerifyKey(public_key).verify(payload.encode(), base64.b64decode(link["signature"]))


def test_an_agent_signed_link_verifies(cortex: str, researcher: Agent,
                                       written: list[str]) -> None:
    secret = kubectl_json("get", "secret", f"{RESEARCHER}-agent-key", "-n", cortex)["data"]
    agent_id = base64.b64decode(secret["agent-id"]).decode()
    key = key_from_seed(AgentId(agent_id),
                        seed_from_pem(base64.b64decode(secret["private.pem"]).decode()))
    a = researcher.store("team/research", "the cache layer halves read latency")["id"]
    b = researcher.store("team/research", "read latency matters for the planner")["id"]
    written.extend([a, b])
    body = {"src_id": a, "dst_id": b, "relation": "derived_from",
            "valid_from": "2026-11-01T10:00:00Z"}
    payload = link_payload(src_id=a, dst_id=b, relation="derived_from", observed_by=agent_id,
                           valid_from=datetime.fromisoformat(body["valid_from"]),
                           valid_until=None)
    body["signature"] = base64.b64encode(sign(key, payload.encode())).decode()
    status, link = researcher.call("POST", "/v1/links", body)
    assert status == 201, link
    assert link["attest_level"] == "peer_attested" and link["observed_by"] == agent_id
    status, check = researcher.call("GET", f"/v1/links/{link['id']}/verify")
    assert status == 200 and check["signature_verified"] is True
    verify_link(key.public.public_key, link)


def test_a_cortex_signed_link_verifies_with_the_public_key_in_status(
        cortex: str, planner: Agent, written: list[str]) -> None:
    status_key = kubectl_json("get", "agentidentity", PLANNER, "-n", cortex)["status"]
    a = planner.store("team/plans", "ship the cache layer in December")["id"]
    b = planner.store("team/plans", "the cache layer needs a load test first")["id"]
    written.extend([a, b])
    status, link = planner.call("POST", "/v1/links",
                                {"src_id": a, "dst_id": b, "relation": "related_to"})
    assert status == 201, link
    assert link["attest_level"] == "self_signed" and link["signed_by"] == status_key["agentId"]
    verify_link(base64.b64decode(status_key["publicKey"]), link)
    status, report = planner.call("GET", "/v1/audit/verify")
    assert status == 200 and report["ok"] is True, report


def _server_pods(namespace: str) -> list[str]:
    pods = kubectl_json("get", "pods", "-n", namespace, "-l",
                        f"app.kubernetes.io/instance={CORTEX},app.kubernetes.io/component=server")
    return [p["metadata"]["name"] for p in pods["items"]
            if not p["metadata"].get("deletionTimestamp")]


def test_deleting_the_server_pod_loses_no_acknowledged_write(
        cortex: str, forward: Forward, planner: Agent, written: list[str]) -> None:
    (old,) = _server_pods(cortex)
    for n in range(5):
        written.append(planner.store("team/ops", f"acknowledged before the restart {n}")["id"])
    ok(kubectl("delete", "pod", old, "-n", cortex, "--wait=true", "--timeout=120s"))
    wait_until(lambda: bool(_server_pods(cortex)) and old not in _server_pods(cortex),
               what="a new server pod", seconds=120, interval_s=0.5)
    ok(kubectl("wait", "-n", cortex, "--for=condition=Available", f"--timeout={WAIT}",
               f"deployment/{CORTEX}-server"))
    forward.start()  # the old forward ended with its pod
    wait_until(lambda: _all_there(planner, written), what="every acknowledged write", seconds=120,
               interval_s=0.5)


def test_deleting_the_database_pod_loses_no_committed_memory(
        cortex: str, forward: Forward, planner: Agent, written: list[str]) -> None:
    pod = f"{CORTEX}-db-0"
    uid = kubectl_json("get", "pod", pod, "-n", cortex)["metadata"]["uid"]
    claim = kubectl_json("get", "pvc", f"data-{pod}", "-n", cortex)["spec"]["volumeName"]
    ok(kubectl("delete", "pod", pod, "-n", cortex, "--wait=true", "--timeout=120s"))
    wait_until(lambda: kubectl("get", "pod", pod, "-n", cortex, "-o",
                               "jsonpath={.metadata.uid}").stdout not in ("", uid),
               what="the StatefulSet's new database pod", seconds=120, interval_s=0.5)
    ok(kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}", f"pod/{pod}"))
    assert kubectl_json("get", "pvc", f"data-{pod}", "-n", cortex)["spec"]["volumeName"] == claim
    wait_until(lambda: _all_there(planner, written), what="every committed memory", seconds=120,
               interval_s=0.5)
    status, report = planner.call("GET", "/v1/audit/verify")
    assert status == 200 and report["ok"] is True, report
    written.append(planner.store("team/ops", "written after the database restart")["id"])


def test_deleting_and_recreating_the_cortex_keeps_its_memories(
        cortex: str, forward: Forward, planner: Agent, written: list[str]) -> None:
    """``kubectl delete mcx`` then the same manifest again: the kept data volume serves.

    The deletion takes the credentials Secret with it and the new cortex generates another
    password; the database image adopts it on start, so the migration and the server get in.
    """
    claim = kubectl_json("get", "pvc", f"data-{CORTEX}-db-0", "-n", cortex)["spec"]["volumeName"]
    ok(kubectl("delete", f"memorycortex/{CORTEX}", "-n", cortex, "--wait=true", "--timeout=60s"))
    wait_until(lambda: not kubectl_json("get", "pods", "-n", cortex, "-l",
                                        f"app.kubernetes.io/instance={CORTEX}")["items"],
               what="the cortex's pods to go", seconds=120, interval_s=0.5)
    assert kubectl_json("get", "pvc", f"data-{CORTEX}-db-0", "-n", cortex)["spec"][
        "volumeName"] == claim, "the data volume claim is kept"
    ok(kubectl("apply", "-f", "-", input=manifests.as_input(manifests.resources(cortex))))
    ready = kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
                    f"memorycortex/{CORTEX}")
    assert ready.returncode == 0, kubectl("get", "-n", cortex, f"memorycortex/{CORTEX}", "-o",
                                          "jsonpath={.status.conditions}").stdout
    forward.start()  # the old forward ended with the old Service
    wait_until(lambda: _all_there(planner, written), what="every memory of the first cortex",
               seconds=120, interval_s=0.5)
    status, report = planner.call("GET", "/v1/audit/verify")
    assert status == 200 and report["ok"] is True, report
    written.append(planner.store("team/ops", "written after the cortex was re-created")["id"])


def _keys(namespace: str) -> dict[str, tuple[str, dict[str, str]]]:
    out = {}
    for name in (f"{PLANNER}-agent-key", f"{RESEARCHER}-agent-key",
                 f"{CORTEX}-db-credentials"):
        secret = kubectl_json("get", "secret", name, "-n", namespace)
        out[name] = (secret["metadata"]["resourceVersion"], secret["data"])
    return out


OPERATOR = "app.kubernetes.io/name=attested-cortex,app.kubernetes.io/component=operator"


def test_helm_upgrade_rolls_the_operator_and_keeps_data_and_keys(
        cortex: str, forward: Forward, planner: Agent, written: list[str]) -> None:
    keys = _keys(cortex)
    operators = {p["metadata"]["uid"] for p in
                 kubectl_json("get", "pods", "-n", cortex, "-l", OPERATOR)["items"]}
    server = kubectl_json("get", "deployment", f"{CORTEX}-server", "-n", cortex)["metadata"]
    upgraded = helm("upgrade", RELEASE, str(CHART), "--namespace", cortex, "--reuse-values",
                    *IMAGE_VALUES, "--set", "operator.logLevel=debug", "--wait",
                    "--timeout", "3m")
    assert upgraded.returncode == 0, upgraded.stderr
    ok(kubectl("rollout", "status", "-n", cortex, "deployment", "-l", OPERATOR,
               f"--timeout={WAIT}"))
    now = kubectl_json("get", "pods", "-n", cortex, "-l", OPERATOR)["items"]
    live = [p for p in now if not p["metadata"].get("deletionTimestamp")]
    assert live and not {p["metadata"]["uid"] for p in live} & operators, "operator not rolled"
    assert any("--debug" in " ".join(c.get("args", []) + c.get("command", []))
               or any(e.get("value") == "debug" for e in c.get("env", []))
               for p in live for c in p["spec"]["containers"]), "the new value did not reach it"
    # The new operator reconciles the cortex again: it stays Ready and nothing changes.
    ok(kubectl("wait", "-n", cortex, "--for=condition=Ready", f"--timeout={WAIT}",
               f"memorycortex/{CORTEX}"))
    wait_until(lambda: "e2e-memory" in kubectl("logs", "-n", cortex, live[0]["metadata"]["name"])
               .stdout, what="the new operator's pass over the cortex", seconds=120, interval_s=0.5)
    assert _keys(cortex) == keys
    again = kubectl_json("get", "deployment", f"{CORTEX}-server", "-n", cortex)["metadata"]
    assert again["generation"] == server["generation"]
    assert _all_there(planner, written)


def test_helm_uninstall_keeps_crds_and_data(cortex: str, planner: Agent,
                                            written: list[str]) -> None:
    keys = _keys(cortex)
    removed = helm("uninstall", RELEASE, "--namespace", cortex, "--wait", "--timeout", "3m")
    assert removed.returncode == 0, removed.stderr
    wait_until(lambda: not kubectl_json("get", "pods", "-n", cortex, "-l", OPERATOR)["items"],
               what="the operator pod to go", seconds=120, interval_s=0.5)
    for plural in ("memorycortexes", "hookchains", "permissionrules", "agentidentities"):
        ok(kubectl("get", "crd", f"{plural}.cortex.attested.dev"))
    ok(kubectl("get", f"memorycortex/{CORTEX}", "-n", cortex))
    ok(kubectl("get", f"pvc/data-{CORTEX}-db-0", "-n", cortex))
    assert _keys(cortex) == keys
    assert _all_there(planner, written)  # the cortex keeps serving without its operator
