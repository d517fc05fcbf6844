"""The objects of an operator-run witness (``spec.audit.witnesses[].run``, ADR 0102). Pure.

Per witness ``<cortex>-witness-<name>``: a ServiceAccount (its token is how it reads the
cortex, mapped to ``audit.read`` alone; it holds no Kubernetes permission), a
PersistentVolumeClaim for its state (the last cosigned checkpoint: a witness that forgot it
would trust any history again), its key Secret (made once by the operator, never
regenerated, read by no one but the pod), and a one-replica ``Recreate`` Deployment of
``cortexctl audit witness --every`` that serves what it last cosigned or refused on
:data:`REPORT_PORT` (``GET /report``, read by the operator). Called by
``controller/memorycortex/witnesses.py``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from attested_cortex.builders import certificates, names, security, services
from attested_cortex.builders.inputs import Cortex, Defaults
from attested_cortex.crd import GROUP
from attested_cortex.crd.witnesses import AuditWitness, RunWitness

Object = dict[str, Any]
KEY_FILE: Final = "witness.key"
KEY_DIR: Final = "/var/run/witness"
STATE_DIR: Final = "/var/lib/witness"
TOKEN_FILE: Final = "/var/run/secrets/kubernetes.io/serviceaccount/token"
#: The witness's one scope on the cortex: it reads checkpoints and proofs, nothing else.
SCOPES: Final = ("audit.read",)
#: Where the witness serves its report (the operator reads it from the pod's IP).
REPORT_PORT: Final = 8090
#: Which witness an object belongs to (the Deployment's selector with the instance).
WITNESS_LABEL: Final = f"{GROUP}/witness"
#: The image's non-root user (the server's).
UID: Final = 65532


def operator_run(cortex: Cortex) -> list[tuple[AuditWitness, RunWitness]]:
    """The witnesses the operator runs, by name."""
    found = [(w, w.run) for w in cortex.spec.audit.witnesses if w.run is not None]
    return sorted(found, key=lambda pair: pair[0].name)


def base_name(cortex: Cortex, witness: str) -> str:
    """``<cortex>-witness-<name>``: every object of one witness."""
    return names.dns_label(f"{cortex.meta.name}-witness-", witness)


def key_name(cortex: Cortex, witness: str) -> str:
    """The witness's key name in its cosignatures (C2SP: no space, no '+')."""
    return f"{cortex.meta.name}.{cortex.meta.namespace}.witness/{witness}"


def agent_mapping(cortex: Cortex) -> list[Object]:
    """``--auth kubernetes``: each witness's ServiceAccount as an ``audit.read`` agent."""
    ns = cortex.meta.namespace
    return [{"service_account": f"{ns}/{base_name(cortex, w.name)}",
             "agent_id": f"k8s:{ns}/{base_name(cortex, w.name)}", "scopes": list(SCOPES)}
            for w, _ in operator_run(cortex)]


def _meta(cortex: Cortex, name: str, witness: str) -> Object:
    meta = names.metadata(name, cortex.meta, component="witness")
    meta["labels"][WITNESS_LABEL] = witness
    return meta


def build_key_secret(cortex: Cortex, witness: str, seed: bytes) -> Object:
    """The witness's Ed25519 seed and key name, in ``cortexctl audit witness``'s key file
    format (``--key-file``)."""
    key = json.dumps({"name": key_name(cortex, witness), "seed": seed.hex()}) + "\n"
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _meta(cortex, f"{base_name(cortex, witness)}-key", witness),
            "stringData": {KEY_FILE: key}}


def build_service_account(cortex: Cortex, witness: str) -> Object:
    """Its identity on the cortex (``audit.read`` alone); no Kubernetes permission."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _meta(cortex, base_name(cortex, witness), witness)}


def build_state_claim(cortex: Cortex, witness: str, run: RunWitness) -> Object:
    spec: Object = {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": run.size}}}
    if run.storage_class_name is not None:
        spec["storageClassName"] = run.storage_class_name
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(cortex, f"{base_name(cortex, witness)}-state", witness),
            "spec": spec}


def _args(cortex: Cortex, run: RunWitness) -> list[str]:
    return ["audit", "witness", "--server", services.endpoint(cortex), "--state", STATE_DIR,
            "--key-file", f"{KEY_DIR}/{KEY_FILE}", "--every", str(run.interval_seconds),
            "--token-file", TOKEN_FILE, "--report-listen", f"0.0.0.0:{REPORT_PORT}"]


def build_deployment(cortex: Cortex, witness: str, run: RunWitness,
                     defaults: Defaults) -> Object:
    """One pod (``Recreate``: never two writers of one state volume)."""
    name = base_name(cortex, witness)
    selector = {names.INSTANCE_LABEL: cortex.meta.name, WITNESS_LABEL: witness}
    ca_volumes, _, ca_mounts = certificates.volumes(cortex)
    ca_args = (["--ca-file", f"{certificates.TLS_CA_DIR}/{certificates.CA_KEY}"]
               if ca_mounts else [])
    container: Object = {
        "name": "witness", "image": defaults.server_image,
        "imagePullPolicy": defaults.image_pull_policy,
        "args": [*_args(cortex, run), *ca_args],
        "ports": [{"name": "report", "containerPort": REPORT_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/report", "port": "report"},
                           "periodSeconds": 10},
        "securityContext": security.container_security(),
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"},
                      "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "state", "mountPath": STATE_DIR},
                         {"name": "key", "mountPath": KEY_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}, *ca_mounts]}
    volumes: list[Object] = [
        {"name": "state", "persistentVolumeClaim": {"claimName": f"{name}-state"}},
        {"name": "key", "secret": {"secretName": f"{name}-key", "defaultMode": 0o400}},
        {"name": "tmp", "emptyDir": {}},
        *[v for v in ca_volumes if v["name"] == "tls-ca"]]
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(cortex, name, witness),
            "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                     "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": {
                         **names.labels(cortex.meta.name, "witness"), **selector}},
                                  "spec": {"serviceAccountName": name,
                                           "securityContext": security.pod_security(
                                               user=UID, group=UID),
                                           "terminationGracePeriodSeconds": 5,
                                           "containers": [container], "volumes": volumes}}}}
