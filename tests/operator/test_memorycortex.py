"""MemoryCortex on the real control plane: the children a running cortex needs, in order,
with status a platform team can wait on (kwok runs the pods and completes the Jobs)."""

from __future__ import annotations

import base64
import json
import time

import pytest
import yaml
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex

pytestmark = pytest.mark.kube

LABELS = {"app.kubernetes.io/name": "attested-cortex",
          "app.kubernetes.io/managed-by": "attested-cortex-operator"}


def test_managed_cortex_becomes_ready_with_every_child(operated: Operated,
                                                       operator: OperatorProcess) -> None:
    operated.apply(cortex("alpha"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/alpha", "--timeout=120s")
    status = operated.get("MemoryCortex", "alpha")["status"]
    assert status["schemaVersion"] >= 4 and status["kgBackend"] == "cte"
    assert status["endpoint"] == f"http://alpha.{operated.namespace}.svc:8080"
    assert status["connectionSecret"] == "alpha-db-credentials"
    assert (status["databaseMode"], status["primary"]) == ("Managed", "alpha-db-0")
    generation = operated.get("MemoryCortex", "alpha")["metadata"]["generation"]
    assert {c["type"]: (c["status"], c["observedGeneration"]) for c in status["conditions"]} == {
        t: ("True", generation) for t in ("DatabaseReady", "SchemaReady", "ServerReady", "Ready",
                                          "StorageReady")} | {
        # kstatus' abnormal-true pair, cleared once Ready (ADR 0046)
        t: ("False", generation) for t in ("Reconciling", "Stalled")}
    for kind, name, component in (("statefulset", "alpha-db", "database"),
                                  ("service", "alpha-db", "database"),
                                  ("networkpolicy", "alpha-db", "database"),
                                  ("secret", "alpha-db-credentials", "database"),
                                  ("job", f"alpha-migrate-v{status['schemaVersion']}", "migration"),
                                  ("deployment", "alpha-server", "server"),
                                  ("service", "alpha", "server"),
                                  ("configmap", "alpha-config", "server"),
                                  ("serviceaccount", "alpha-server", "server")):
        obj = json.loads(operated.kubectl("get", kind, name, "-o", "json").stdout)
        labels = obj["metadata"]["labels"]
        assert labels | LABELS == labels, (kind, name)
        assert labels["app.kubernetes.io/instance"] == "alpha"
        assert labels["app.kubernetes.io/component"] == component
        owner = obj["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["controller"]) == (
            "MemoryCortex", "alpha", True)
    component = "jsonpath={.items[*].metadata.labels.app\\.kubernetes\\.io/component}"
    pods = operated.kubectl("get", "pods", "-l", "app.kubernetes.io/instance=alpha",
                            "-o", component)
    assert {"database", "server"} <= set(pods.stdout.split())


def test_credentials_are_generated_once_and_never_in_status(operated: Operated,
                                                            operator: OperatorProcess) -> None:
    operated.apply(cortex("beta"))
    secret = wait_until(lambda: operated.get("secret", "beta-db-credentials"), what="credentials",
                        seconds=60, interval_s=0.2)
    password = base64.b64decode(secret["data"]["password"]).decode()
    assert len(password) >= 32
    operated.kubectl("annotate", "mcx/beta", "touch=1")
    operated.kubectl("patch", "mcx/beta", "--type=merge", "-p",
                     json.dumps({"spec": {"server": {"replicas": 2}}}))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/beta", "--timeout=120s")
    again = operated.get("secret", "beta-db-credentials")
    assert again["data"] == secret["data"]
    whole = json.dumps(operated.get("MemoryCortex", "beta"))
    assert password not in whole
    events = operated.kubectl("get", "events", "-o", "json").stdout
    assert password not in events and password not in operator.output()


def test_existing_credentials_are_adopted(operated: Operated, operator: OperatorProcess) -> None:
    operated.kubectl("create", "secret", "generic", "gamma-db-credentials",
                     "--from-literal=password=chosen-by-the-platform-team",
                     "--from-literal=uri=postgresql://cortex:x@gamma-db:5432/cortex")
    operated.apply(cortex("gamma"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/gamma", "--timeout=120s")
    secret = operated.get("secret", "gamma-db-credentials")
    assert base64.b64decode(secret["data"]["password"]) == b"chosen-by-the-platform-team"


def test_external_database_waits_for_its_secret(operated: Operated,
                                                operator: OperatorProcess) -> None:
    operated.apply(cortex("delta", database={"external": {"secretRef": {"name": "delta-uri"}}}))
    cond = operated.wait_condition("MemoryCortex", "delta", "DatabaseReady", "False",
                                   reason="ConnectionSecretMissing")
    assert "delta-uri" in cond["message"]
    assert operated.get("statefulset", "delta-db") is None
    operated.kubectl("create", "secret", "generic", "delta-uri",
                     "--from-literal=uri=postgresql://u:p@db.example.invalid/x")
    operated.kubectl("wait", "--for=condition=Ready", "mcx/delta", "--timeout=120s")
    deployment = json.loads(operated.kubectl("get", "deploy", "delta-server", "-o",
                                             "json").stdout)
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "CORTEX_DATABASE_URL", "valueFrom": {"secretKeyRef": {
        "name": "delta-uri", "key": "uri"}}} in env
    status = operated.get("MemoryCortex", "delta")["status"]
    assert status["connectionSecret"] == "delta-uri"
    assert status["databaseMode"] == "External" and "primary" not in status


def test_disruption_budget_only_with_two_replicas(operated: Operated,
                                                  operator: OperatorProcess) -> None:
    operated.apply(cortex("eps", server={"replicas": 2}))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/eps", "--timeout=120s")
    assert operated.get("poddisruptionbudget", "eps-server") is not None
    operated.kubectl("patch", "mcx/eps", "--type=merge", "-p",
                     json.dumps({"spec": {"server": {"replicas": 1}}}))
    wait_until(lambda: operated.get("poddisruptionbudget", "eps-server") is None,
               what="budget removed", seconds=60, interval_s=0.2)


def test_config_map_holds_settings_the_server_loads(operated: Operated,
                                                    operator: OperatorProcess,
                                                    tmp_path) -> None:
    from attested_cortex.server.settings import load_settings

    operated.apply(cortex("zeta", permissions={"mode": "Enforce"}))
    config = wait_until(lambda: operated.get("configmap", "zeta-config"), what="config map",
                        seconds=60, interval_s=0.2)
    path = tmp_path / "config.yaml"
    path.write_text(config["data"]["config.yaml"])
    settings = load_settings(path, {"database_url": "postgresql://x"})
    assert settings.permissions.mode == "enforce" and settings.auth == "kubernetes"
    assert "postgresql" not in config["data"]["config.yaml"]
    assert yaml.safe_load(config["data"]["hooks.yaml"]) == {"version": 1, "hooks": []}


def test_a_change_kubernetes_refuses_is_reported_not_retried(operated: Operated,
                                                            operator: OperatorProcess) -> None:
    operated.apply(cortex("refused"))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/refused", "--timeout=120s")
    # Valid for the CRD, refused by the API server's validation of the Deployment.
    operated.kubectl("patch", "mcx/refused", "--type=merge", "-p", json.dumps(
        {"spec": {"server": {"resources": {"requests": {"cpu": "2"},
                                           "limits": {"cpu": "1"}}}}}))
    cond = operated.wait_condition("MemoryCortex", "refused", "Ready", "False",
                                   reason="ApplyRefused")
    assert "refused-server" in cond["message"]
    def errors() -> float:
        return operator.metric("cortex_operator_reconciles_total", kind="MemoryCortex",
                               outcome="error")

    first = errors()
    assert first >= 1
    # Two measurement windows: the status write that reported the refusal comes back as an
    # event and may cause one more (refused) pass in the first; a retry with backoff (1 s,
    # doubling) would add passes at about 1, 3 and 7 s, so the second window would see one.
    time.sleep(4)
    second = errors()
    assert second - first <= 1
    time.sleep(4)
    assert errors() == second


def _storage(operated: Operated, name: str) -> dict[str, str]:
    conditions = operated.get("MemoryCortex", name)["status"]["conditions"]
    return next(c for c in conditions if c["type"] == "StorageReady")


def test_a_larger_storage_size_grows_the_claim_and_changes_nothing_else(
        operated: Operated, operator: OperatorProcess) -> None:
    """The StatefulSet's claim template is immutable: the operator grows the claim itself
    (an expandable class), says why it cannot (the default class, a smaller size, another
    class) and keeps applying the rest of the spec either way."""
    operated.kube.kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "expandable"}, "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate", "allowVolumeExpansion": True}))
    operated.kube.add_volumes(1, size="1Gi", storage_class="expandable")
    operated.apply(cortex("grow", database={"managed": {"storage": {
        "size": "1Gi", "storageClassName": "expandable"}}}))
    operated.apply(cortex("fixed"))
    for name in ("grow", "fixed"):
        operated.kubectl("wait", "--for=condition=Ready", f"mcx/{name}", "--timeout=120s")
    template = operated.get("statefulset", "grow-db")["spec"]["volumeClaimTemplates"]

    operated.kubectl("patch", "mcx/grow", "--type=merge", "-p", json.dumps({"spec": {
        "database": {"managed": {"storage": {"size": "2Gi"}}}, "graph": {"backend": "CTE"}}}))
    grown = wait_until(lambda: operated.get(
        "pvc", "data-grow-db-0")["spec"]["resources"]["requests"]["storage"] == "2Gi",
                       what="the claim's new request", seconds=60, interval_s=0.2)
    assert grown
    wait_until(lambda: _storage(operated, "grow")["reason"] == "Resizing",
               what="StorageReady=Resizing", seconds=60, interval_s=0.2)
    assert "1Gi" in _storage(operated, "grow")["message"]  # no resizer here: capacity stays
    assert operated.get("statefulset", "grow-db")["spec"]["volumeClaimTemplates"] == template
    operated.kubectl("wait", "--for=condition=Ready", "mcx/grow", "--timeout=60s")

    operated.kubectl("patch", "mcx/fixed", "--type=merge", "-p", json.dumps({"spec": {
        "database": {"managed": {"storage": {"size": "20Gi"}}},
        "server": {"replicas": 2}}}))
    wait_until(lambda: _storage(operated, "fixed")["reason"] == "ResizeRefused",
               what="ResizeRefused", seconds=60, interval_s=0.2)
    assert "storageclass" in _storage(operated, "fixed")["message"].lower()
    wait_until(lambda: operated.get(
        "deployment", "fixed-server")["spec"]["replicas"] == 2, what="the rest of the spec applied",
               seconds=60, interval_s=0.2)
    status = operated.get("MemoryCortex", "fixed")["status"]
    assert next(c for c in status["conditions"] if c["type"] == "Ready")["status"] == "True"
    events = operated.kubectl("get", "events", "--field-selector",
                              "involvedObject.name=fixed,type=Warning", "-o", "json").stdout
    assert "ResizeRefused" in events

    operated.kubectl("patch", "mcx/grow", "--type=merge", "-p", json.dumps({"spec": {
        "database": {"managed": {"storage": {"size": "512Mi"}}}}}))
    wait_until(lambda: _storage(operated, "grow")["reason"] == "ShrinkRefused",
               what="ShrinkRefused", seconds=60, interval_s=0.2)
    assert operated.get("pvc", "data-grow-db-0")["spec"]["resources"]["requests"][
        "storage"] == "2Gi"


def test_a_removed_logical_backup_takes_its_cronjob_condition_and_status_along(
        operated: Operated, operator: OperatorProcess) -> None:
    logical = {"schedule": "0 3 * * *", "retention": 2, "objectStore": {
        "endpoint": "http://minio.backup:9000", "bucket": "backups",
        "credentialsSecretRef": {"name": "s3-keys"}}}
    operated.apply(cortex("omega", backup={"logical": logical}))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/omega", "--timeout=120s")
    operated.wait_condition("MemoryCortex", "omega", "LogicalBackupHealthy", "Unknown",
                            reason="BackupScheduled")
    operated.kubectl("create", "job", "omega-backup-now", "--from=cronjob/omega-backup")
    operated.wait_condition("MemoryCortex", "omega", "LogicalBackupHealthy", "True",
                            reason="BackupSucceeded", seconds=120)  # kwok ran the export pod
    status = operated.get("MemoryCortex", "omega")["status"]
    assert status["logicalBackup"]["lastBackupName"] == "omega-backup-now"

    operated.kubectl("patch", "mcx/omega", "--type=json", "-p",
                     json.dumps([{"op": "remove", "path": "/spec/backup/logical"}]))

    def gone() -> bool:
        status = operated.get("MemoryCortex", "omega")["status"]
        types = {c["type"] for c in status["conditions"]}
        return (operated.get("cronjob", "omega-backup") is None and "logicalBackup" not in status
                and "LogicalBackupHealthy" not in types)
    wait_until(gone, what="the CronJob, LogicalBackupHealthy and status.logicalBackup gone",
               seconds=60, interval_s=0.5)
    status = operated.get("MemoryCortex", "omega")["status"]
    ready = next(c for c in status["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True"
