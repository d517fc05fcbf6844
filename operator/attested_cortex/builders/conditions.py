"""Status conditions in the metav1.Condition shape, with observedGeneration. Pure.

A controller computes the conditions it owns as :class:`Observation` values; :func:`merge`
keeps each condition's ``lastTransitionTime`` while its status stays the same, so writing
the same observation twice changes nothing (an idle operator writes nothing), and
:func:`transitions` lists what changed, for Kubernetes events.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Object = dict[str, Any]
Status = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class Observation:
    """One condition as a controller observed it."""

    type: str
    status: Status
    reason: str
    message: str

    @classmethod
    def of(cls, type_: str, ok: bool, reason: str, message: str) -> Observation:
        """True when ``ok`` else False."""
        return cls(type_, "True" if ok else "False", reason, message)


def merge(old: Sequence[Object] | None, observed: Iterable[Observation], *,
          generation: int, now: str) -> list[Object]:
    """The new ``status.conditions``: observed ones replace their type, others are kept."""
    previous = {c.get("type"): c for c in old or ()}
    merged = dict(previous)
    for obs in observed:
        before = previous.get(obs.type)
        since = before.get("lastTransitionTime") if before and before.get(
            "status") == obs.status else now
        merged[obs.type] = {"type": obs.type, "status": obs.status,
                            "observedGeneration": generation,
                            "lastTransitionTime": since or now, "reason": obs.reason,
                            "message": obs.message[:32768]}
    return sorted(merged.values(), key=lambda c: str(c.get("type")))


def transitions(old: Sequence[Object] | None, new: Sequence[Object]) -> list[Object]:
    """Conditions whose status or reason changed (the ones worth an event)."""
    previous = {c.get("type"): c for c in old or ()}
    changed = []
    for cond in new:
        before = previous.get(cond.get("type"))
        if before is None or (before.get("status"), before.get("reason")) != (
                cond.get("status"), cond.get("reason")):
            changed.append(cond)
    return changed


def ready(parts: Sequence[Observation], *, ready_reason: str = "Ready",
          ready_message: str = "all conditions are true") -> Observation:
    """The summary Ready condition: the first part that is not True decides."""
    for part in parts:
        if part.status != "True":
            return Observation("Ready", "False" if part.status == "False" else "Unknown",
                               part.reason, f"{part.type}: {part.message}")
    return Observation("Ready", "True", ready_reason, ready_message)


#: The two abnormal-true conditions kstatus reads (Flux's health, ADR 0046), derived from Ready.
KSTATUS_TYPES = frozenset({"Reconciling", "Stalled"})


def kstatus(summary: Observation, progressing: frozenset[str]) -> list[Observation]:
    """Reconciling and Stalled from the summary Ready: kstatus reads Ready False as
    InProgress whatever its reason, so a failure (a reason not in ``progressing``, e.g.
    MigrationFailed) must say Stalled=True to read Failed; something on its way says
    Reconciling=True; Ready True clears both. Written False rather than removed, so that a
    pass that finds nothing new finds them equal and writes nothing."""
    if summary.status == "True":
        return [Observation("Reconciling", "False", summary.reason, "ready"),
                Observation("Stalled", "False", summary.reason, "ready")]
    moving = summary.reason in progressing or summary.status == "Unknown"
    return [Observation("Reconciling", "True" if moving else "False", summary.reason,
                        summary.message if moving else "stopped: see Stalled"),
            Observation("Stalled", "False" if moving else "True", summary.reason,
                        "in progress: see Reconciling" if moving else summary.message)]


def find(conditions: Sequence[Object] | None, type_: str) -> Object | None:
    """The condition of ``type_``, if present."""
    return next((c for c in conditions or () if c.get("type") == type_), None)


def cortex_found(cortex: str, found: bool) -> Observation:
    """A satellite's ``CortexFound``: whether the MemoryCortex it names exists (yet)."""
    return Observation.of("CortexFound", found, "CortexFound" if found else "CortexNotFound",
                          f"MemoryCortex {cortex} " + ("exists" if found else
                                                       "does not exist (yet)"))
