"""The object store's pod on the real node (hack/objectstore.py, ADR 0037): its own volume,
one writer of it, the "restricted" Pod Security Standard, credentials only by reference, and
the Secret a cortex's backup names in CloudNativePG's key names."""

from __future__ import annotations

import base64

from hack import objectstore

from tests.builders.specs import assert_restricted


def test_minio_runs_restricted_on_its_own_volume() -> None:
    docs = objectstore.manifests(access_key="root", secret_key="s3cr3t-value",
                                 server_image="docker.io/attested-cortex/minio:x")
    by_kind = {d["kind"]: d for d in docs}
    assert list(by_kind) == ["Namespace", "Secret", "PersistentVolumeClaim", "Deployment",
                             "Service"]
    assert by_kind["Namespace"]["metadata"]["labels"] == {
        "pod-security.kubernetes.io/enforce": "restricted"}
    deployment = by_kind["Deployment"]["spec"]
    assert (deployment["replicas"], deployment["strategy"]) == (1, {"type": "Recreate"})
    template = deployment["template"]
    assert_restricted(template)
    assert template["spec"]["volumes"][0] == {"name": "data", "persistentVolumeClaim": {
        "claimName": "minio"}}
    assert "s3cr3t-value" not in str(deployment)  # the password only in the Secret
    assert objectstore.endpoint() == "http://minio.objectstore.svc:9000"


def test_the_cortex_credentials_secret_uses_cloudnativepg_key_names() -> None:
    secret = objectstore.credentials_secret("s3", "team-a", access_key="a", secret_key="b")
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "ACCESS_KEY_ID": "a", "ACCESS_SECRET_KEY": "b"}
    assert objectstore.image().startswith("docker.io/attested-cortex/minio:2026")
