"""Names, labels and owner references of every child object, in one place.

Deterministic: the same custom resource always yields the same child names, so a repeated
or interrupted reconcile finds (and adopts) what an earlier one created. Pure.
"""

from __future__ import annotations

import hashlib
from typing import Any, Final, Literal

from attested_cortex.builders.inputs import Meta
from attested_cortex.crd import GROUP, VERSION

Component = Literal["database", "migration", "server", "backup", "witness"]
Object = dict[str, Any]

APP: Final = "attested-cortex"
MANAGED_BY: Final = "attested-cortex-operator"
#: The one server-side apply field manager of the operator.
FIELD_MANAGER: Final = "attested-cortex-operator"

NAME_LABEL: Final = "app.kubernetes.io/name"
INSTANCE_LABEL: Final = "app.kubernetes.io/instance"
COMPONENT_LABEL: Final = "app.kubernetes.io/component"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
#: On objects a satellite owns (key Secrets): the AgentIdentity's name.
IDENTITY_LABEL: Final = f"{GROUP}/agent-identity"
#: The Namespace a cluster-scoped child (ClusterRoleBinding) serves.
NAMESPACE_LABEL: Final = f"{GROUP}/namespace"
CONFIG_HASH_ANNOTATION: Final = f"{GROUP}/config-hash"
SCHEMA_VERSION_ANNOTATION: Final = f"{GROUP}/schema-version"
KEY_REVISION_ANNOTATION: Final = f"{GROUP}/key-revision"
KEY_CREATED_ANNOTATION: Final = f"{GROUP}/key-created-at"


def dns_label(prefix: str, name: str) -> str:
    """``prefix + name`` as a DNS-1123 label (container and volume names): dots become
    dashes, and a name with a dot or too long for 63 characters is cut if need be and given
    a hash of the whole, so two names never collide (``a.b`` and ``a-b`` included)."""
    label = f"{prefix}{name}".replace(".", "-")
    if len(label) <= 63 and label[-1].isalnum() and "." not in name:
        return label
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{label[:54].rstrip('-')}-{digest}"


def labels(cortex: str, component: Component | None = None) -> dict[str, str]:
    """The recommended labels: ``kubectl get pods -l app.kubernetes.io/instance=<cortex>``."""
    out = {NAME_LABEL: APP, INSTANCE_LABEL: cortex, MANAGED_BY_LABEL: MANAGED_BY}
    if component is not None:
        out[COMPONENT_LABEL] = component
    return out


def selector(cortex: str, component: Component) -> dict[str, str]:
    """Pod selector of one component (immutable once a workload exists)."""
    return {NAME_LABEL: APP, INSTANCE_LABEL: cortex, COMPONENT_LABEL: component}


def owner_reference(kind: str, meta: Meta) -> Object:
    """The controller reference that makes the child go when the custom resource goes."""
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind, "name": meta.name,
            "uid": meta.uid, "controller": True, "blockOwnerDeletion": True}


def namespace_owner(namespace: str, uid: str) -> Object:
    """An owner reference to the Namespace (not a controller): the object goes only with the
    namespace, or with its last other owner (the garbage collector drops a deleted owner's
    reference while another remains)."""
    return {"apiVersion": "v1", "kind": "Namespace", "name": namespace, "uid": uid}


def metadata(name: str, owner: Meta, *, kind: str = "MemoryCortex",
             component: Component | None = None, cortex: str | None = None) -> Object:
    """``metadata`` of a namespaced child owned by ``owner``."""
    return {"name": name, "namespace": owner.namespace,
            "labels": labels(cortex or owner.name, component),
            "ownerReferences": [owner_reference(kind, owner)]}


def db_name(cortex: str) -> str:
    """StatefulSet, headless Service and NetworkPolicy of the managed database."""
    return f"{cortex}-db"


def db_secret_name(cortex: str) -> str:
    """Generated database credentials (created once, never regenerated)."""
    return f"{cortex}-db-credentials"


def server_name(cortex: str) -> str:
    """Server Deployment, ServiceAccount and PodDisruptionBudget."""
    return f"{cortex}-server"


def service_name(cortex: str) -> str:
    """The Service clients reach the memory server through."""
    return cortex


def config_name(cortex: str) -> str:
    """The rendered configuration ConfigMap."""
    return f"{cortex}-config"


def approval_secret_name(cortex: str) -> str:
    """Generated HMAC key of the approval API."""
    return f"{cortex}-approval-hmac"


def audit_signer_secret_name(cortex: str) -> str:
    """Generated key pair the server signs its own audit records with."""
    return f"{cortex}-audit-signer"


def master_key_secret_name(cortex: str) -> str:
    """Generated master key of the cortex's key hierarchy (ADR 0050)."""
    return f"{cortex}-master-key"


def tls_secret_name(cortex: str) -> str:
    """The server's certificate (selfSigned and certManager; also the Certificate's name)."""
    return f"{cortex}-tls"


def tls_ca_secret_name(cortex: str) -> str:
    """The selfSigned CA's key pair (created once)."""
    return f"{cortex}-tls-ca"


def ca_bundle_name(cortex: str) -> str:
    """The ConfigMap publishing the selfSigned CA (``ca.crt``) for clients."""
    return f"{cortex}-ca"


def job_name(cortex: str, version: int) -> str:
    """The migration Job of one target schema version."""
    return f"{cortex}-migrate-v{version}"


def backup_cronjob_name(cortex: str) -> str:
    """The logical backup CronJob (at most 47 characters: a CronJob's name may have 52)."""
    return f"{cortex}-backup"


def tokenreview_binding_name(namespace: str, cortex: str) -> str:
    """Cluster-scoped binding that lets the server review service-account tokens."""
    return f"attested-cortex:{namespace}:{cortex}"


def key_secret_name(identity: str) -> str:
    """The key pair Secret of an AgentIdentity."""
    return f"{identity}-agent-key"


def webhook_secret_name(subscription: str) -> str:
    """The generated signing secret of a CortexSubscription without ``secretRef``."""
    return f"{subscription}-webhook"


def staged_key_secret_name(identity: str) -> str:
    """A rotation's next key, staged before it is swapped in."""
    return f"{identity}-agent-key-next"


#: Every name family of a cortex's namespaced children, by kind: the suffix the family
#: appends to the cortex's name (the migration Jobs, ``-migrate-v<N>``, are one family of
#: their own kind). Two families of one kind collide exactly when one suffix ends with the
#: other; the only such pair is the Service's ``""`` and ``"-db"`` (cortex ``a``'s database
#: Service is cortex ``a-db``'s API Service). Both names are public and immutable in
#: practice (ADR 0021), so that pair is guarded at apply time: an object controlled by
#: another owner is never adopted or patched.
FAMILIES: Final[dict[str, tuple[str, ...]]] = {
    "Service": ("", "-db"), "StatefulSet": ("-db",), "NetworkPolicy": ("-db",),
    "Secret": ("-db-credentials", "-approval-hmac", "-audit-signer", "-master-key", "-tls",
               "-tls-ca"),
    "ConfigMap": ("-config", "-ca"), "Certificate": ("-tls",),
    "ServiceAccount": ("-server",), "Deployment": ("-server",),
    "PodDisruptionBudget": ("-server",), "CronJob": ("-backup",)}


def claimants(kind: str, name: str) -> set[str]:
    """The cortex names whose name families yield ``name`` for a child of ``kind``: the
    cortexes that must look again when that object changes (one may be waiting for it)."""
    return {name[: len(name) - len(suffix)] for suffix in FAMILIES.get(kind, ())
            if name.endswith(suffix) and len(name) > len(suffix)}


def federation_identity_secret_name(cortex: str) -> str:
    """The cortex's generated Ed25519 federation identity (issue 42)."""
    return f"{cortex}-federation-identity"


def federation_tls_secret_name(cortex: str) -> str:
    """The cortex's federation client certificate (selfSigned and certManager)."""
    return f"{cortex}-federation-tls"


def federation_peers_name(cortex: str) -> str:
    """The ConfigMap of the peers' CA bundles."""
    return f"{cortex}-federation-peers"
