"""Which status transitions are Warning events, and under which reason (controller/statuses.py):
a transition (a rollout, a satellite settling, a primary moving) is Normal; a fault is a
Warning under the failing condition's own reason, never the Ready summary's."""

from __future__ import annotations

from typing import Any

from attested_cortex.controller.statuses import summarise


def _c(type_: str, status: str, reason: str) -> dict[str, Any]:
    return {"type": type_, "status": status, "reason": reason, "message": "m"}


def test_a_satellite_waiting_for_the_rollout_is_normal() -> None:
    for changed in ([_c("InForce", "False", "NotRunning"), _c("Ready", "False", "NotRunning")],
                    [_c("ServerReady", "False", "ChangesPending"),
                     _c("Ready", "False", "ChangesPending")],
                    [_c("DatabaseReady", "False", "PrimaryChanging")],
                    # a folder's apply (or a GitOps sync) makes satellites before their cortex
                    [_c("CortexFound", "False", "CortexNotFound"),
                     _c("Ready", "False", "CortexNotFound")]):
        assert summarise(changed)["type_"] == "Normal", changed


def test_a_fault_is_a_warning_under_its_own_reason() -> None:
    event = summarise([_c("Ready", "True", "CortexReady"),
                       _c("BackupHealthy", "False", "ArchivingFailing")])
    assert (event["type_"], event["reason"]) == ("Warning", "ArchivingFailing")
    event = summarise([_c("ServerReady", "False", "CrashLoopBackOff"),
                       _c("Ready", "False", "CrashLoopBackOff")])
    assert (event["type_"], event["reason"]) == ("Warning", "CrashLoopBackOff")


def test_a_recovery_is_normal_under_readys_reason() -> None:
    event = summarise([_c("DatabaseReady", "True", "ClusterHealthy"),
                       _c("Ready", "True", "CortexReady")])
    assert (event["type_"], event["reason"]) == ("Normal", "CortexReady")
