"""Every condition reason the reconcilers set, declared once with what it means. Pure.

A reason decides two things a user sees (ADRs 0046, 0092, 0118): how GitOps tools read a
Ready=False with it (kstatus: Reconciling=True is InProgress, Stalled=True is Failed), and
whether a False condition with it posts a Warning event (a fault someone must act on) or a
Normal one (a transition). Both used to be two hand-kept sets in controller/statuses.py, and
a reason forgotten in them read as a failure. Here each reason is classified once;
tests/builders/test_reasons.py checks that every reason the code can set is in :data:`REASONS`
and nothing else is, and tests/gitops/test_reasons_kstatus.py that kstatus reads each class
as intended.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final


class Health(enum.Enum):
    """What a reason says about its object."""

    #: The reason of a True condition: the object is as asked (kstatus Current).
    READY = "Ready"
    #: On its way, or waiting for something that comes by itself: Reconciling=True
    #: (kstatus InProgress).
    RECONCILING = "Reconciling"
    #: Stopped until someone acts: Stalled=True (kstatus Failed).
    STALLED = "Stalled"


@dataclass(frozen=True)
class Meaning:
    """A reason's class, and whether a False condition with it is a Warning event."""

    health: Health
    warns: bool


_READY: Final = Meaning(Health.READY, warns=False)
#: Progress: Reconciling, and its events are Normal.
_PROGRESS: Final = Meaning(Health.RECONCILING, warns=False)
#: Waiting for what usually comes by itself, but worth a Warning while it does not.
_WAITING_WARNS: Final = Meaning(Health.RECONCILING, warns=True)
#: A fault: Stalled and a Warning.
_FAULT: Final = Meaning(Health.STALLED, warns=True)

#: Reason -> meaning. A reason missing here is a test failure, not a silent default.
REASONS: Final[Mapping[str, Meaning]] = {
    # -- of True conditions --------------------------------------------------------------
    **dict.fromkeys([
        "AsRequested", "BackupSucceeded", "BackupsSucceeding", "ClusterDegraded",
        "ClusterHealthy", "Compiled", "CortexFound", "CortexReady", "DatabaseRunning",
        "ExternalDatabase", "HooksInForce", "KeyInSecret", "KeyReady", "Loaded", "Migrated",
        "Paused", "RuleInForce", "Running", "ScaledToZero", "ServerAvailable", "Valid",
        "Verified", "Witnessed",
        # a CortexSubscription: its signing Secret, and delivered by its cortex
        "InForce", "SecretFound", "SecretGenerated",
        # and its delivery as the cortex reports it (ADR 0130)
        "Delivering"], _READY),
    # -- progress ------------------------------------------------------------------------
    **dict.fromkeys([
        "DatabaseStarting", "WaitingForDatabase", "Migrating", "WaitingForSchema",
        "ServerRollingOut", "Reconciling", "Resizing", "WaitingForGarbageCollection",
        "BackupScheduled", "ClusterCreating", "BackupPending", "Verifying",
        "ChangesPending", "PrimaryChanging",
        # a logical restore's import Job runs (then Verifying)
        "Importing",
        # a satellite applied (a folder, a GitOps sync) before its cortex
        "CortexNotFound",
        # an operator-run witness starting, or its cortex rolling (ADR 0102)
        "WitnessPending",
        # a CortexSubscription the cortex has not synced yet, or one switched off
        "DeliveryPending", "DeliveryDisabled"], _PROGRESS),
    # -- waiting, with a Warning ---------------------------------------------------------
    **dict.fromkeys([
        # a Secret Git applies beside the cortex (a sealed or external secret) comes later
        "ConnectionSecretMissing", "SecretMissing",
        # a restore's verifier that could not run: retried with backoff (ADR 0054)
        "VerificationError",
        # a subscription's receiver failing: retried on the schedule, may come back
        "DeliveryFailing"], _WAITING_WARNS),
    # A satellite is NotRunning until its cortex's serving pods load it, which a rollout
    # always passes through (a Normal event, issue 38); kstatus reads it Failed meanwhile.
    "NotRunning": Meaning(Health.STALLED, warns=False),
    # -- faults --------------------------------------------------------------------------
    **dict.fromkeys([
        "ApplyRefused", "ArchivingFailing", "BackupFailed", "CertManagerMissing",
        "CloudNativePGMissing", "ClusterFailed", "DatabaseNewerThanBuild", "DowngradeRefused",
        "DuplicateAgentId", "DuplicateKey", "DuplicateServiceAccount", "ImportFailed",
        "Invalid", "InvalidHook", "InvalidSchedule", "InvalidSpec", "KeyLost",
        "KeyMismatch", "MasterKeyRefused", "MigrationFailed", "NameCollision",
        "PrimaryNotReady", "ReconcileError", "ResizeRefused", "RestoreNotVerified",
        "RolloutStuck", "ServerPodsFailing", "ShrinkRefused", "StorageClassImmutable",
        "TargetVersionUnsupported", "UnreadableKey", "UnreadableSize",
        "WitnessRefused", "WitnessUnsupported",
        # a subscription's events given up on or dropped: someone must replay or purge
        "BehindRetention", "DeadLetters"], _FAULT),
}

#: Reasons kstatus must read as InProgress (Reconciling=True) rather than Failed.
MOVING: Final = frozenset(r for r, m in REASONS.items() if m.health is Health.RECONCILING)
#: Reasons of a False condition that are a transition, not a fault: their events are Normal.
TRANSITIONS: Final = frozenset(r for r, m in REASONS.items()
                               if m.health is not Health.READY and not m.warns)
