"""The logical restore's pure half (builders/restores.py): literals in, the import Job and
the verdicts out."""

from __future__ import annotations

from attested_cortex.builders import restores, verification
from tests.builders.specs import CORTEX, DEFAULTS, assert_child_metadata, assert_restricted, cortex

STORE = {"endpoint": "http://minio:9000/", "bucket": "bkp", "credentialsSecretRef": {"name": "s3"}}
RESTORED = cortex({"restore": {"logical": {"objectStore": STORE, "sourceCortex": "src"}}})


def test_a_logical_restore_is_verified() -> None:
    assert verification.restores_data(RESTORED)
    assert restores.restore_spec(cortex()) is None


def test_the_location_names_the_source_folder_or_a_bundle() -> None:
    spec = restores.restore_spec(RESTORED)
    assert spec is not None
    assert restores.location(RESTORED, spec) == "s3://bkp/team-a/src"
    named = cortex({"restore": {"logical": {
        "objectStore": {**STORE, "path": "/team/notes/"}, "bundle": "20261202T030000.5Z"}}})
    spec = restores.restore_spec(named)
    assert spec is not None
    assert restores.location(named, spec) == "s3://bkp/team/notes/20261202T030000.5Z"


def test_the_job_imports_once_with_secrets_only_from_secrets() -> None:
    job = restores.build_import_job(RESTORED, DEFAULTS)
    assert_child_metadata(job, name=f"{CORTEX}-import-restore", component="migration")
    pod = job["spec"]["template"]
    assert_restricted(pod)
    (container,) = pod["spec"]["containers"]
    assert container["args"] == ["import", "--from", "s3://bkp/team-a/src", "--already-ok",
                                 "--json", "--summary", "/dev/termination-log"]
    assert container["env"] == [
        {"name": "CORTEX_DATABASE_URL", "valueFrom": {"secretKeyRef": {
            "name": f"{CORTEX}-db-credentials",
            "key": "uri"}}},
        {"name": "AWS_ENDPOINT_URL", "value": "http://minio:9000"},
        {"name": "AWS_ACCESS_KEY_ID", "valueFrom": {"secretKeyRef": {
            "name": "s3", "key": "ACCESS_KEY_ID"}}},
        {"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {
            "name": "s3", "key": "ACCESS_SECRET_KEY"}}}]
    assert pod["spec"]["automountServiceAccountToken"] is False
    # A refused bundle (exit 1) fails the Job at once; other failures are retried.
    assert job["spec"]["podFailurePolicy"] == {"rules": [{"action": "FailJob", "onExitCodes": {
        "containerName": "import", "operator": "In", "values": [1]}}]}
    assert job["spec"]["backoffLimit"] == 3
    signed = cortex({"restore": {"logical": {"objectStore": STORE, "sourceCortex": "src",
                                             "requireSignature": True}}})
    assert "--require-signature" in restores.build_import_job(
        signed, DEFAULTS)["spec"]["template"]["spec"]["containers"][0]["args"]


def test_a_pinned_signer_is_passed_by_key_id_or_mounted_public_key_alone() -> None:
    key_id = "ab" * 32
    by_id = cortex({"restore": {"logical": {"objectStore": STORE, "sourceCortex": "src",
                                            "signer": {"keyId": key_id}}}})
    pod = restores.build_import_job(by_id, DEFAULTS)["spec"]["template"]["spec"]
    assert pod["containers"][0]["args"][-2:] == ["--signer", key_id]
    assert [v["name"] for v in pod["volumes"]] == ["tmp"]
    by_secret = cortex({"restore": {"logical": {
        "objectStore": STORE, "sourceCortex": "src",
        "signer": {"secretRef": {"name": "src-audit-signer"}}}}})
    pod = restores.build_import_job(by_secret, DEFAULTS)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"][-2:] == ["--signer", "/etc/cortex/source-signer/public.pem"]
    # Only public.pem of the signer's Secret (which also holds its private key) is mounted.
    assert pod["volumes"][1] == {"name": "source-signer", "secret": {
        "secretName": "src-audit-signer", "defaultMode": 0o444,
        "items": [{"key": "public.pem", "path": "public.pem"}]}}
    assert container["volumeMounts"][1] == {"name": "source-signer", "readOnly": True,
                                            "mountPath": "/etc/cortex/source-signer"}
    assert_restricted(restores.build_import_job(by_secret, DEFAULTS)["spec"]["template"])


def test_verdicts_of_the_import() -> None:
    refused = restores.refused("j", {"ok": False, "refused": True, "source": "s3://b/p/x",
                                     "code": "missing_chunk", "where": "chunks/links-1.copy",
                                     "message": "missing_chunk at chunks/links-1.copy: absent"})
    assert (refused.condition.status, refused.condition.reason) == (
        "False", "RestoreNotVerified")
    assert refused.restore == {"verified": False, "importJob": "j", "source": "s3://b/p/x",
                               "firstMismatch": "missing_chunk at chunks/links-1.copy"}
    failed = restores.could_not_run("j", "database unreachable")
    assert (failed.condition.reason, failed.restore) == ("ImportFailed", None)
    assert restores.imported("j", {"ok": True, "source": "s3://b/p/x"}) == {
        "source": "s3://b/p/x", "importJob": "j"}
