"""The memory server Deployment: the server container, Daemon-hook sidecars, key mounts.

What needs a restart (the images, the sidecars, the mounts, the auth mode and
``config.yaml``, which the server reads once) is hashed into the pod template's config-hash
annotation, so such a change rolls the pods. The hook file and the keyring are hot-reloaded
from the mounted ConfigMap, and a key Secret's new content reaches the pods without a
restart, so those changes roll nothing. A Cortex-custody identity whose key Secret is gone
(``lost_keys``) is not mounted: a required Secret volume that does not exist leaves every new
pod in ``ContainerCreating`` (found on the real node: a rollout after ``KeyLost`` stranded
the server), and a cortex that cannot sign for one agent must still serve the others. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from attested_cortex.builders import (
    certificates,
    configmaps,
    federation,
    hookfiles,
    names,
    podparts,
    secrets,
    security,
    settings,
    sidecars,
)
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import Cortex, Defaults, Identity, Subscription
from attested_cortex.builders.jobs import CORTEX_UID, cortex_image
from attested_cortex.builders.services import SERVER_PORT, port_name

Object = dict[str, Any]

#: Where the ConfigMap's keyring files appear; ``_`` is in no Kubernetes object name, so an
#: identity's own mount (``KEYS_DIR/<identity>``) can never land on it.
KEYRING_DIR: Final = f"{configmaps.KEYS_DIR}/_keyring"
#: Files of a Cortex-custody key Secret the server reads (the keyring comes from the ConfigMap).
KEY_FILES: Final = ("agent-id", "private.pem", "public.pem", "fingerprint")


def cortex_custody(identities: Iterable[Identity]) -> list[Identity]:
    """Identities whose private key the server holds and signs with (status.secretName set)."""
    return sorted((i for i in identities
                   if i.spec.key_custody == "Cortex" and i.status.secret_name),
                  key=lambda i: i.meta.name)


def _volumes(cortex: Cortex, satellites: Satellites,
             lost_keys: frozenset[str]) -> tuple[list[Object], list[Object]]:
    config = names.config_name(cortex.meta.name)
    volumes: list[Object] = [
        {"name": "config", "configMap": {"name": config, "items": [
            {"key": configmaps.CONFIG_FILE, "path": configmaps.CONFIG_FILE},
            {"key": configmaps.HOOKS_FILE, "path": configmaps.HOOKS_FILE}]}},
        {"name": sidecars.SOCKET_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    mounts: list[Object] = [
        {"name": "config", "mountPath": configmaps.CONFIG_DIR, "readOnly": True},
        {"name": sidecars.SOCKET_VOLUME, "mountPath": hookfiles.SOCKET_DIR},
        {"name": "tmp", "mountPath": "/tmp"}]
    # The whole ConfigMap: the server reads only its keyring-*.json files there, and a new
    # identity's file appears in place instead of changing the pod template.
    volumes.append({"name": "keyring", "configMap": {"name": config}})
    mounts.append({"name": "keyring", "readOnly": True, "mountPath": KEYRING_DIR})
    for identity in cortex_custody(satellites.identities):
        if identity.status.secret_name in lost_keys:
            continue
        volume = names.dns_label("key-", identity.meta.name)
        volumes.append({"name": volume, "secret": {
            "secretName": identity.status.secret_name, "defaultMode": 0o440,
            "items": [{"key": f, "path": f} for f in KEY_FILES]}})
        mounts.append({"name": volume, "readOnly": True,
                       "mountPath": f"{configmaps.KEYS_DIR}/{identity.meta.name}"})
    _auth_volumes(cortex, volumes, mounts)
    _subscription_volume(satellites, volumes, mounts)
    _settings_volumes(cortex, volumes, mounts)
    tls_volumes, tls_mounts, _ = certificates.volumes(cortex)
    volumes.extend(tls_volumes)
    mounts.extend(tls_mounts)
    federated_volumes, federated_mounts = federation.volumes(cortex)
    volumes.extend(federated_volumes)
    mounts.extend(federated_mounts)
    return volumes, mounts


def subscription_secret(subscription: Subscription) -> tuple[str, str]:
    """The Secret and key a CortexSubscription signs with: its ``secretRef``, else the
    one the operator generates."""
    ref = subscription.spec.secret_ref
    if ref is not None:
        return ref.name, ref.key
    return names.webhook_secret_name(subscription.meta.name), secrets.WEBHOOK_KEY


def _subscription_volume(satellites: Satellites, volumes: list[Object],
                         mounts: list[Object]) -> None:
    """Every subscription's signing secret, one file per subscription (a projected volume:
    a rotated Secret's new value appears in the running pods, and the server's next sync
    reads it)."""
    if not satellites.subscriptions:
        return
    sources = []
    for subscription in satellites.subscriptions:
        name, key = subscription_secret(subscription)
        # optional: a missing Secret (a typo in secretRef) costs its subscription only
        # (the server logs the unreadable file), never the pods' start
        sources.append({"secret": {"name": name, "optional": True, "items": [
            {"key": key, "path": subscription.meta.name}]}})
    volumes.append({"name": "subscriptions", "projected": {"defaultMode": 0o440,
                                                           "sources": sources}})
    mounts.append({"name": "subscriptions", "readOnly": True,
                   "mountPath": configmaps.SUBSCRIPTIONS_DIR})


def _settings_volumes(cortex: Cortex, volumes: list[Object], mounts: list[Object]) -> None:
    """The audit signer's key, the master key ring and the embedding endpoint's key, each
    from its Secret."""
    signer = settings.audit_signer_secret(cortex)
    if signer is not None:
        volumes.append({"name": "audit-signer", "secret": {
            "secretName": signer, "defaultMode": 0o440,
            "items": [{"key": f, "path": f} for f in KEY_FILES]}})
        mounts.append({"name": "audit-signer", "readOnly": True,
                       "mountPath": f"{configmaps.KEYS_DIR}/{settings.AUDIT_SIGNER_SUBDIR}"})
    # The whole Secret (no items): a version added later appears as a file in the running
    # pods; the server reads the ring at start, so it is used from the next restart.
    volumes.append({"name": "master-key", "secret": {
        "secretName": names.master_key_secret_name(cortex.meta.name), "defaultMode": 0o440}})
    mounts.append({"name": "master-key", "readOnly": True,
                   "mountPath": settings.MASTER_KEY_DIR})
    embedding = cortex.spec.embedding
    if embedding.mode == "Endpoint" and embedding.api_key_secret_ref is not None:
        ref = embedding.api_key_secret_ref
        volumes.append({"name": "embedding-key", "secret": {
            "secretName": ref.name, "defaultMode": 0o440,
            "items": [{"key": ref.key, "path": settings.EMBEDDING_KEY_FILE}]}})
        mounts.append({"name": "embedding-key", "readOnly": True,
                       "mountPath": settings.EMBEDDING_DIR})
    onnx = embedding.onnx
    if embedding.mode == "Onnx" and onnx is not None:
        source: Object = ({"image": {"reference": onnx.image, "pullPolicy": "IfNotPresent"}}
                          if onnx.image is not None else
                          {"persistentVolumeClaim": {"claimName": onnx.claim_name,
                                                     "readOnly": True}})
        volumes.append({"name": "embedding-model", **source})
        mounts.append({"name": "embedding-model", "readOnly": True,
                       "mountPath": settings.EMBEDDING_MODEL_DIR})
    reflection = cortex.spec.spoke_memory.reflection
    if reflection is not None and reflection.api_key_secret_ref is not None:
        ref = reflection.api_key_secret_ref
        volumes.append({"name": "reflection-key", "secret": {
            "secretName": ref.name, "defaultMode": 0o440,
            "items": [{"key": ref.key, "path": settings.EMBEDDING_KEY_FILE}]}})
        mounts.append({"name": "reflection-key", "readOnly": True,
                       "mountPath": settings.REFLECTION_DIR})


def _auth_volumes(cortex: Cortex, volumes: list[Object], mounts: list[Object]) -> None:
    tokens = cortex.spec.server.auth.tokens_secret_ref
    if cortex.spec.server.auth.mode == "Tokens" and tokens is not None:
        volumes.append({"name": "tokens", "secret": {
            "secretName": tokens.name, "defaultMode": 0o440,
            "items": [{"key": tokens.key, "path": "tokens"}]}})
        mounts.append({"name": "tokens", "mountPath": settings.TOKENS_DIR, "readOnly": True})
    if cortex.spec.approval.enabled:
        ref = cortex.spec.approval.hmac_secret_ref
        name, key = (ref.name, ref.key) if ref else (names.approval_secret_name(cortex.meta.name),
                                                     "hmac")
        volumes.append({"name": "approval", "secret": {
            "secretName": name, "defaultMode": 0o440, "items": [{"key": key, "path": "hmac"}]}})
        mounts.append({"name": "approval", "mountPath": settings.APPROVAL_DIR,
                       "readOnly": True})


def _probe(cortex: Cortex, path: str, period: int, failures: int) -> Object:
    """An HTTP(S) probe (the kubelet does not verify the certificate: it checks the
    server answers, the clients check who it is). No ``scheme`` for HTTP, its default: a
    cortex without TLS keeps the pod template it had, and is not rolled by an upgrade."""
    port = port_name(cortex)
    get: Object = {"path": path, "port": port}
    if port == "https":
        get["scheme"] = "HTTPS"
    return {"httpGet": get, "periodSeconds": period, "timeoutSeconds": 3,
            "failureThreshold": failures}


def _server_container(cortex: Cortex, defaults: Defaults, mounts: list[Object]) -> Object:
    return {
        "name": "server", "image": cortex_image(cortex, defaults),
        "imagePullPolicy": defaults.image_pull_policy, "command": ["cortexctl"],
        "args": ["serve", "--config", f"{configmaps.CONFIG_DIR}/{configmaps.CONFIG_FILE}"],
        "env": [podparts.database_env(cortex)],
        "ports": [{"name": port_name(cortex), "containerPort": SERVER_PORT, "protocol": "TCP"}],
        "readinessProbe": _probe(cortex, "/readyz", 5, 3),
        "livenessProbe": _probe(cortex, "/healthz", 10, 6),
        "resources": security.resources(cortex.spec.server.resources),
        "securityContext": security.container_security(), "volumeMounts": mounts,
        # A refused start's last lines (a master key that is not the cortex's: ADR 0088)
        # become the termination message ServerReady reports.
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }


def build_deployment(cortex: Cortex, defaults: Defaults, satellites: Satellites,
                     lost_keys: frozenset[str] = frozenset()) -> Object:
    """The server Deployment, its pod template hashed into ``config-hash``; the key Secrets
    named in ``lost_keys`` are not mounted."""
    name = cortex.meta.name
    volumes, mounts = _volumes(cortex, satellites, lost_keys)
    kubernetes_auth = cortex.spec.server.auth.mode == "Kubernetes"
    _, _, ca_mounts = certificates.volumes(cortex)
    ca_file = f"{certificates.TLS_CA_DIR}/{certificates.CA_KEY}" if ca_mounts else None
    containers = [_server_container(cortex, defaults, mounts),
                  *sidecars.build_sidecars(satellites.hooks, defaults.image_pull_policy,
                                           server_port=SERVER_PORT, token_file=kubernetes_auth,
                                           ca_file=ca_file, mounts=ca_mounts)]
    pod_spec: Object = {
        "serviceAccountName": names.server_name(name),
        "automountServiceAccountToken": kubernetes_auth, "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "securityContext": security.pod_security(user=CORTEX_UID, group=CORTEX_UID),
        "containers": containers, "volumes": volumes}
    restart_inputs = {"pod": pod_spec, "config": configmaps.server_settings(cortex, satellites)}
    template = {"metadata": {"labels": names.labels(name, "server"), "annotations": {
                    names.CONFIG_HASH_ANNOTATION: configmaps.digest(restart_inputs)}},
                "spec": pod_spec}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": names.metadata(names.server_name(name), cortex.meta, component="server"),
            "spec": {"replicas": cortex.spec.server.replicas, "revisionHistoryLimit": 3,
                     "selector": {"matchLabels": names.selector(name, "server")},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                     "template": template}}
