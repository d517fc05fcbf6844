"""Delete flows: a satellite's removal leaves its cortex's configuration; a cortex's removal
takes every child with it, including the cluster-scoped TokenReview binding, but for the audit
signer's key, which the Namespace keeps with the chain it signed."""

from __future__ import annotations

import pytest
import yaml
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube

EXEC = {"name": "redact", "events": ["pre_store"], "command": ["redact"]}


def _config(operated: Operated, name: str) -> dict:
    data = operated.get("configmap", f"{name}-config")["data"]
    return {"config": yaml.safe_load(data["config.yaml"]),
            "hooks": yaml.safe_load(data["hooks.yaml"]),
            "keyrings": sorted(k for k in data if k.startswith("keyring-"))}


def test_deleting_satellites_updates_the_cortex(operated: Operated,
                                                operator: OperatorProcess) -> None:
    operated.apply(cortex("shrink"), satellite("AgentIdentity", "leaver", "shrink"),
                   satellite("HookChain", "leaving-hooks", "shrink", hooks=[EXEC]),
                   satellite("PermissionRule", "leaving-rule", "shrink", namespace="a",
                             agents=["*"], operations=["*"], decision="Deny"))
    operated.kubectl("wait", "--for=condition=Ready", "aid/leaver", "hc/leaving-hooks",
                     "prule/leaving-rule", "--timeout=90s")
    wait_until(lambda: (c := _config(operated, "shrink"))["keyrings"] == [
        "keyring-leaver.json"] and c["hooks"]["hooks"] and c["config"]["permissions"]["rules"],
               what="all three rendered", seconds=60, interval_s=0.2)
    operated.kubectl("delete", "aid/leaver", "hc/leaving-hooks", "prule/leaving-rule")
    wait_until(lambda: (c := _config(operated, "shrink"))["keyrings"] == []
             and not c["hooks"]["hooks"] and not c["config"]["permissions"]["rules"],
               what="all three gone", seconds=60, interval_s=0.2)
    wait_until(lambda: operated.get("secret",
                                                              "leaver-agent-key") is None,
               what="the key Secret collected", seconds=60, interval_s=0.2)
    status = operated.get("MemoryCortex", "shrink")["status"]
    assert status["ruleSummary"] == [] and status["hookCount"] == 0


def test_deleting_a_cortex_removes_every_child(operated: Operated,
                                               operator: OperatorProcess) -> None:
    operated.apply(cortex("doomed", server={"replicas": 2}))
    operated.kubectl("wait", "--for=condition=Ready", "mcx/doomed", "--timeout=120s")
    binding = f"attested-cortex:{operated.namespace}:doomed"
    assert operated.kube.kubectl("get", "clusterrolebinding", binding,
                                 check=False).returncode == 0
    operated.kubectl("delete", "mcx/doomed", "--timeout=60s")
    selector = "app.kubernetes.io/instance=doomed"

    # The audit signer's key Secret and the master key Secret are owned by the Namespace too
    # and stay, as the chain they signed and keyed does in the database's volume (ADRs 0035,
    # 0050); everything else goes.
    kept = ["secret/doomed-audit-signer", "secret/doomed-master-key"]

    def nothing_left() -> bool:
        out = operated.kubectl("get", "sts,deploy,job,svc,cm,secret,netpol,sa,pdb", "-l",
                               selector, "-o", "name").stdout.split()
        gone = operated.kube.kubectl("get", "clusterrolebinding", binding, check=False)
        return sorted(out) == kept and gone.returncode != 0

    wait_until(nothing_left, what="every child of doomed but its signer and master keys to go",
               seconds=120, interval_s=0.2)
    for secret in ("doomed-audit-signer", "doomed-master-key"):
        owners = operated.get("secret", secret)["metadata"]["ownerReferences"]
        assert [o["kind"] for o in owners if o["kind"] == "Namespace"] == ["Namespace"]
