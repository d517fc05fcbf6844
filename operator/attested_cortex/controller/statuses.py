"""Status and events: each controller's conditions, written only when they changed.

A status is written with server-side apply to the status subresource (the one field
manager), only if the new fields differ from what the object already shows, so a reconcile
that finds nothing new writes nothing. The transitions of one write become one Kubernetes
Event: Normal for a transition (progress, a change settling, a primary moving), a Warning only
when a condition is wrong in a way an operator must act on, and then with that condition's
own reason (not the Ready summary's). Messages never
carry secrets: callers put names, reasons and counts in them, not data.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Final

from attested_cortex.builders.conditions import (
    KSTATUS_TYPES,
    Observation,
    find,
    kstatus,
    merge,
    ready,
    transitions,
)
from attested_cortex.builders.inputs import Meta, parse_meta
from attested_cortex.controller.applying import Writer
from attested_cortex.controller.eventing import now, post_event
from attested_cortex.crd import GROUP, VERSION

Object = dict[str, Any]


def _differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return any(current.get(key) != value for key, value in wanted.items())


async def write_status(writer: Writer, *, kind: str, meta: Meta, current: Mapping[str, Any],
                       observed: Sequence[Observation],
                       fields: Mapping[str, Any] | None = None,
                       dropped: Collection[str] = ()) -> bool:
    """Merge ``observed`` into the conditions, remove the ``dropped`` types (what the spec no
    longer asks for), set ``fields`` (None removes one); write if anything changed."""
    old = current.get("conditions") or []
    conditions = [c for c in merge(old, observed, generation=meta.generation, now=now())
                  if c.get("type") not in dropped]
    conditions = _with_kstatus(conditions, generation=meta.generation)
    wanted: Object = {"observedGeneration": meta.generation, "conditions": conditions,
                      **(fields or {})}
    if not _differs(current, wanted):
        return False
    # The whole status is applied: a field a pass does not mention keeps its value (an
    # invalid HookChain keeps acceptedHooks, a paused cortex its schemaVersion); only an
    # explicit None removes one.
    status = {k: v for k, v in {**current, **wanted}.items() if v is not None}
    await writer.apply({"apiVersion": f"{GROUP}/{VERSION}", "kind": kind,
                        "metadata": {"name": meta.name, "namespace": meta.namespace},
                        "status": status}, subresource="status")
    # Reconciling and Stalled only restate Ready: no event of their own.
    changed = [c for c in transitions(old, conditions) if c["type"] not in KSTATUS_TYPES]
    if changed:
        await post_event(writer, kind=kind, meta=meta, **summarise(changed))
    return True


def _with_kstatus(conditions: list[Object], *, generation: int) -> list[Object]:
    """Reconciling and Stalled derived from the merged Ready (ADR 0046)."""
    summary = find(conditions, "Ready")
    if summary is None:
        return conditions
    derived = kstatus(Observation(summary["type"], summary["status"], summary["reason"],
                                  summary["message"]), MOVING)
    return merge(conditions, derived, generation=generation, now=now())


async def report_unparsable(writer: Writer, *, kind: str, body: Mapping[str, Any],
                            type_: str, reason: str, message: str) -> None:
    """A spec the models refuse: the failed condition and Ready, nothing else."""
    bad = Observation.of(type_, False, reason, message)
    await write_status(writer, kind=kind, meta=parse_meta(body),
                       current=body.get("status") or {}, observed=[bad, ready([bad])])


#: Reasons that mean "still on its way", not "something is wrong".
PROGRESSING: Final = frozenset({
    "DatabaseStarting", "WaitingForDatabase", "Migrating", "WaitingForSchema",
    "ServerRollingOut", "Reconciling", "Resizing", "WaitingForGarbageCollection",
    "BackupScheduled", "ClusterCreating", "BackupPending", "Verifying"})
#: What kstatus must read as InProgress (Reconciling=True) rather than Failed (Stalled=True):
#: the progressing reasons and the transient ones that are still events' Warnings.
MOVING: Final = PROGRESSING | frozenset({
    "ChangesPending", "PrimaryChanging", "ContainerCreating", "Progressing", "CortexNotFound",
    # a Secret Git applies beside the cortex (a sealed or external secret) comes a little later
    "ConnectionSecretMissing", "SecretMissing",
    # a restore's verifier that could not run: retried with backoff (ADR 0054)
    "VerificationError"})


#: Reasons of a False condition that are a transition, not a fault: an event about them is
#: Normal (issue 38: a clean install and every spec change posted Warnings). A satellite is
#: NotRunning until its cortex's serving pods load it, which a rollout always passes through,
#: and CortexNotFound while an apply of a folder (or a GitOps sync) creates it before its
#: cortex; one whose cortex never comes stays Ready=False with that reason in its status.
TRANSITIONS: Final = PROGRESSING | frozenset({
    "ChangesPending", "PrimaryChanging", "ContainerCreating", "Progressing", "NotRunning",
    "CortexNotFound",
    # an operator-run witness starting, or its cortex rolling (ADR 0102)
    "WitnessPending"})


def summarise(changed: Sequence[Object]) -> dict[str, str]:
    """One event for one status write. Warning when a changed condition is wrong rather
    than in transition, with that condition's reason; otherwise Normal with the Ready
    transition's reason (else the first change's)."""
    bad = [c for c in changed if c["status"] != "True" and c["reason"] not in TRANSITIONS]
    if bad:  # the condition itself, not the Ready that restates it
        lead = next((c for c in bad if c["type"] != "Ready"), bad[0])
    else:
        lead = next((c for c in changed if c["type"] == "Ready"), changed[0])
    message = "; ".join(f"{c['type']}={c['status']} ({c['reason']}): {c['message']}"
                        for c in changed)
    return {"type_": "Warning" if bad else "Normal", "reason": lead["reason"],
            "message": message}
