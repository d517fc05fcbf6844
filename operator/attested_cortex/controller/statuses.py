"""Status and events: each controller's conditions, written only when they changed.

A status is written with server-side apply to the status subresource (the one field
manager), only if the new fields differ from what the object already shows, so a reconcile
that finds nothing new writes nothing. Every condition transition becomes a Kubernetes
Event (Normal when it turns True, Warning otherwise). Messages never carry secrets: callers
put names, reasons and counts in them, not data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attested_cortex.builders.conditions import Observation, merge, transitions
from attested_cortex.builders.inputs import Meta
from attested_cortex.controller.applying import Writer
from attested_cortex.controller.eventing import now, post_event
from attested_cortex.crd import GROUP, VERSION

Object = dict[str, Any]


def _differs(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    return any(current.get(key) != value for key, value in wanted.items())


async def write_status(writer: Writer, *, kind: str, meta: Meta, current: Mapping[str, Any],
                       observed: Sequence[Observation],
                       fields: Mapping[str, Any] | None = None) -> bool:
    """Merge ``observed`` into the conditions, set ``fields`` (None removes one); write if
    anything changed."""
    old = current.get("conditions") or []
    conditions = merge(old, observed, generation=meta.generation, now=now())
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
    for cond in transitions(old, conditions):
        await post_event(writer, kind=kind, meta=meta,
                         type_="Normal" if cond["status"] == "True" else "Warning",
                         reason=cond["reason"], message=f"{cond['type']}: {cond['message']}")
    return True
