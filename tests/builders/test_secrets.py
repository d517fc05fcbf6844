"""Secrets built from material the controller generated."""

import base64

from attested_cortex.builders.secrets import (
    build_approval_secret,
    build_db_credentials,
    build_key_secret,
)
from tests.builders.specs import API_VERSION, CORTEX, NAMESPACE, assert_child_metadata, cortex
from tests.builders.specs import identity as make_identity


def decoded(secret: dict[str, object]) -> dict[str, str]:
    data = secret["data"]
    assert isinstance(data, dict)
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_db_credentials() -> None:
    secret = build_db_credentials(cortex(), "s3cr3t-pw")
    assert secret["kind"] == "Secret" and secret["type"] == "Opaque"
    assert_child_metadata(secret, name=f"{CORTEX}-db-credentials", component="database")
    assert decoded(secret) == {
        "username": "cortex", "password": "s3cr3t-pw",
        "uri": f"postgresql://cortex:s3cr3t-pw@{CORTEX}-db.{NAMESPACE}.svc:5432/cortex"}


def test_approval_secret() -> None:
    secret = build_approval_secret(cortex(), "ab" * 32)
    assert_child_metadata(secret, name=f"{CORTEX}-approval-hmac", component="server")
    assert decoded(secret) == {"hmac": "ab" * 32}


def test_key_secret_is_owned_by_the_identity() -> None:
    ident = make_identity("planner")
    secret = build_key_secret(ident, name="planner-agent-key",
                              files={"agent-id": "k8s:team-a/planner", "private.pem": "PEM"},
                              revision=2, created_at="2026-11-30T10:00:00Z")
    meta = secret["metadata"]
    assert meta["name"] == "planner-agent-key" and meta["namespace"] == NAMESPACE
    assert meta["ownerReferences"] == [{"apiVersion": API_VERSION, "kind": "AgentIdentity",
                                        "name": "planner", "uid": ident.meta.uid,
                                        "controller": True, "blockOwnerDeletion": True}]
    assert meta["labels"]["app.kubernetes.io/instance"] == CORTEX
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "attested-cortex-operator"
    assert meta["labels"]["cortex.attested.dev/agent-identity"] == "planner"
    assert meta["annotations"] == {"cortex.attested.dev/key-revision": "2",
                                   "cortex.attested.dev/key-created-at": "2026-11-30T10:00:00Z"}
    assert decoded(secret) == {"agent-id": "k8s:team-a/planner", "private.pem": "PEM"}


def test_template_labels_never_replace_the_operators() -> None:
    ident = make_identity("planner", spec={"secretTemplate": {
        "labels": {"team": "search", "app.kubernetes.io/instance": "hijack",
                   "cortex.attested.dev/agent-identity": "someone-else"},
        "annotations": {"owner": "ops", "cortex.attested.dev/key-revision": "99"}}})
    meta = build_key_secret(ident, name="planner-agent-key", files={}, revision=1,
                            created_at="2026-11-30T10:00:00Z")["metadata"]
    assert meta["labels"]["team"] == "search"
    assert meta["labels"]["app.kubernetes.io/instance"] == CORTEX
    assert meta["labels"]["cortex.attested.dev/agent-identity"] == "planner"
    assert meta["annotations"]["owner"] == "ops"
    assert meta["annotations"]["cortex.attested.dev/key-revision"] == "1"
