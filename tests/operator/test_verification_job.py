"""The restore verification Job as the real API server takes it (ADR 0054): its
``podFailurePolicy`` (exit 1 of ``verify`` fails the Job, a disrupted pod does not count)
is validated by the Job API itself, which a memory cluster cannot do. A server-side dry run:
no operator process, a second or two on the session's control plane."""

from __future__ import annotations

import json

import pytest
from hack.support.kube import Kube

from attested_cortex.builders import verification
from tests.builders.specs import DEFAULTS, cortex

pytestmark = pytest.mark.kube

RESTORED = cortex({"database": {"cloudNativePG": {"bootstrap": {"recovery": {
    "objectStore": {"endpoint": "http://minio:9000", "bucket": "bkp",
                    "credentialsSecretRef": {"name": "s3"}}, "sourceCortex": "src"}}}}})


def test_the_api_server_accepts_the_verification_job_and_keeps_its_failure_policy(
        kube: Kube) -> None:
    job = verification.build_verification_job(RESTORED, DEFAULTS, attempt=3)
    job["metadata"].pop("ownerReferences", None)  # its owner does not exist here
    job["metadata"]["namespace"] = "default"
    created = kube.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                           input=json.dumps(job), check=False)
    assert created.returncode == 0, created.stderr
    spec = json.loads(created.stdout)["spec"]
    assert spec["podFailurePolicy"] == job["spec"]["podFailurePolicy"]
    assert spec["backoffLimit"] == verification.BACKOFF_LIMIT

    broken = json.loads(json.dumps(job))  # the API does check the policy: a wrong container
    broken["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["containerName"] = "nope"
    refused = kube.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(broken),
                           check=False)
    assert refused.returncode != 0 and "containerName" in refused.stderr, refused.stderr
