"""A CortexSubscription's delivery state from its cortex's delivery report (issue 41,
ADR 0130): the ``status.delivery`` fields and the ``Delivering`` condition. Pure: the report
item in (the server's JSON for this subscription, or None when the server does not list it
yet), the fields and the observation out. Called by the CortexSubscription controller.

The fields change only when the delivery does (lag, a success, a failure, a dead letter), so
a pass over an idle subscription computes what the status already shows and writes nothing.
The error is the server's short class (``HTTP 503``, ``timed out``), cut to the field's
bound; a report item is the server's answer, so every value is checked before use.
``Delivering`` is not part of ``Ready`` (which says the subscription is in force): a
receiver that is down is the receiver's fault, not the resource's.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from attested_cortex.builders.conditions import Observation

CONDITION: Final = "Delivering"
_TIME_MAX: Final = 64
_ERROR_MAX: Final = 128


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 \
        else None


def _time(value: Any) -> str | None:
    if not isinstance(value, str) or len(value) > _TIME_MAX:
        return None
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return None
    return value


def fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """``status.delivery`` of a report item (camelCase, absent values left out)."""
    error = item.get("last_error")
    found = {"lag": _count(item.get("lag")),
             "lastSuccessTime": _time(item.get("last_success_at")),
             "lastFailureTime": _time(item.get("last_failure_at")),
             "lastError": error[:_ERROR_MAX] if isinstance(error, str) else None,
             "deadLetters": _count(item.get("dead_letters")),
             "behindRetention": item.get("behind_retention")
             if isinstance(item.get("behind_retention"), bool) else None}
    return {k: v for k, v in found.items() if v is not None}


def _failing(shown: Mapping[str, Any]) -> bool:
    failed, succeeded = shown.get("lastFailureTime"), shown.get("lastSuccessTime")
    if failed is None:
        return False
    return succeeded is None or datetime.fromisoformat(failed) > \
        datetime.fromisoformat(succeeded)


def observation(item: Mapping[str, Any] | None, shown: Mapping[str, Any]) -> Observation:
    """``Delivering`` for a report item and its fields."""
    if item is None:
        return Observation.of(CONDITION, False, "DeliveryPending",
                              "the cortex has not taken the subscription into its table yet")
    if item.get("enabled") is False:
        return Observation.of(CONDITION, False, "DeliveryDisabled",
                              "spec.enabled is false: events wait in the outbox")
    if shown.get("behindRetention"):
        return Observation.of(CONDITION, False, "BehindRetention",
                              "the outbox dropped events before they were delivered; "
                              "replay what the receiver missed from its own source")
    dead = shown.get("deadLetters") or 0
    if dead:
        return Observation.of(CONDITION, False, "DeadLetters",
                              f"{dead} events in the dead-letter queue: kubectl cortex "
                              "dead-letters to inspect, replay or purge them")
    if _failing(shown):
        return Observation.of(CONDITION, False, "DeliveryFailing",
                              "the last attempt failed "
                              f"({shown.get('lastError') or 'no reason given'}); retrying")
    return Observation.of(CONDITION, True, "Delivering",
                          "delivered in order; the lag is in status.delivery")


def delivery(report: Mapping[str, Any], name: str) -> tuple[dict[str, Any] | None, Observation]:
    """The status fields (None: not listed) and the condition of subscription ``name``."""
    listed = report.get("subscriptions")
    item = next((s for s in listed if isinstance(s, Mapping) and s.get("name") == name),
                None) if isinstance(listed, list) else None
    shown = fields(item) if item is not None else None
    return shown, observation(item, shown or {})
