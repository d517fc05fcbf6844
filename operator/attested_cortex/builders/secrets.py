"""Secrets the operator generates: database credentials, the approval HMAC key, agent keys,
the cortex's audit signer key and its master key.

Each is built from material the controller generated (the builders draw no randomness) and
is created with a create-only request: an existing Secret is adopted, never overwritten.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex, Identity, Meta, Subscription

Object = dict[str, Any]

DB_USER: Final = "cortex"
DB_NAME: Final = "cortex"
DB_PORT: Final = 5432
#: Keys of the database credentials Secret.
PASSWORD_KEY: Final = "password"
URI_KEY: Final = "uri"
HMAC_KEY: Final = "hmac"
#: The key of a generated webhook signing Secret.
WEBHOOK_KEY: Final = "secret"


def _secret(meta: Object, data: dict[str, str]) -> Object:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": meta,
            "data": encoded}


def database_uri(cortex: Meta, password: str) -> str:
    """The in-cluster connection URI of a managed database."""
    host = f"{names.db_name(cortex.name)}.{cortex.namespace}.svc"
    return f"postgresql://{DB_USER}:{password}@{host}:{DB_PORT}/{DB_NAME}"


def build_db_credentials(cortex: Cortex, password: str) -> Object:
    """Username, password and URI of the managed database (``password`` from the caller)."""
    meta = names.metadata(names.db_secret_name(cortex.meta.name), cortex.meta,
                          component="database")
    return _secret(meta, {"username": DB_USER, PASSWORD_KEY: password,
                          URI_KEY: database_uri(cortex.meta, password)})


def build_approval_secret(cortex: Cortex, key_hex: str) -> Object:
    """The HMAC key that signs approval decisions."""
    meta = names.metadata(names.approval_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    return _secret(meta, {HMAC_KEY: key_hex})


def build_key_secret(identity: Identity, *, name: str, files: dict[str, str],
                     revision: int, created_at: str) -> Object:
    """An agent's key pair in the ``--keys-dir`` format (file name -> content).

    Labelled with the cortex and the identity; the template's labels and annotations are
    added, never allowed to replace the operator's own.
    """
    template = identity.spec.secret_template
    labels = {**(template.labels or {} if template else {}),
              **names.labels(identity.spec.cortex_ref.name),
              names.IDENTITY_LABEL: identity.meta.name}
    annotations = {**(template.annotations or {} if template else {}),
                   names.KEY_REVISION_ANNOTATION: str(revision),
                   names.KEY_CREATED_ANNOTATION: created_at}
    meta = {"name": name, "namespace": identity.meta.namespace, "labels": labels,
            "annotations": annotations,
            "ownerReferences": [names.owner_reference("AgentIdentity", identity.meta)]}
    return _secret(meta, files)


def build_audit_signer_secret(cortex: Cortex, files: dict[str, str], *,
                              namespace_uid: str) -> Object:
    """The audit signer's key pair in the ``--keys-dir`` format (file name -> content).

    Controlled by the cortex and owned by its Namespace too (as the CloudNativePG Cluster
    is, ADR 0028): the chain it signed outlives a deleted cortex in the database's volume,
    so the key must too, or a cortex made again under the same name would generate a new
    one and its deep audit would find the earlier events signed by a key it does not know
    (ADR 0035)."""
    meta = names.metadata(names.audit_signer_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    meta["ownerReferences"].append(names.namespace_owner(cortex.meta.namespace, namespace_uid))
    return _secret(meta, files)


def build_master_key_secret(cortex: Cortex, files: dict[str, str], *,
                            namespace_uid: str) -> Object:
    """The cortex's master key ring (``attest.masterkeys.ring_files``: ``current`` and
    ``v<N>`` in hex), the root of its key hierarchy (ADR 0050).

    Controlled by the cortex and owned by its Namespace too, as the audit signer is (ADR
    0035): what is encrypted or keyed under it stays in the database's volume after the
    cortex is deleted, and a cortex made again under the same name must read it."""
    meta = names.metadata(names.master_key_secret_name(cortex.meta.name), cortex.meta,
                          component="server")
    meta["ownerReferences"].append(names.namespace_owner(cortex.meta.namespace, namespace_uid))
    return _secret(meta, files)


def build_webhook_secret(subscription: Subscription, secret: str) -> Object:
    """A CortexSubscription's Standard Webhooks secret (``whsec_...``, from the caller),
    owned by the subscription and labelled with its cortex."""
    meta = names.metadata(names.webhook_secret_name(subscription.meta.name), subscription.meta,
                          kind="CortexSubscription", component="server",
                          cortex=subscription.spec.cortex_ref.name)
    return _secret(meta, {WEBHOOK_KEY: secret})
