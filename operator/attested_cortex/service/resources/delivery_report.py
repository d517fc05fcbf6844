"""The delivery report: each subscription's delivery state without credentials, for the
operator's CortexSubscription status (issue 41, ADR 0130 section "status"). Served public
like ``/metrics`` (which already names the subscriptions and their lag), so it carries only
what a status may show: lag, last success and failure times, a *short* error (its class:
``HTTP 503``, ``timed out``, the client error's type, never a host, URL or body), dead
letters, whether retention dropped events. No URL, no secret, no payload.

Read from the subscription table (the same on every replica) and the deliverer's outbox
bounds; called by the ``GET /v1/delivery-report`` route.
"""

from __future__ import annotations

import re
from typing import Any, Final

from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.resources.introspection import subscriptions

#: The reasons a failed attempt records that are already short and secret-free.
_PLAIN: Final = re.compile(r"^(HTTP [1-5][0-9]{2}|timed out)$")
_CLIENT_ERROR: Final = re.compile(r"^([A-Za-z][A-Za-z0-9_]{0,63}):")


def short_error(why: str | None) -> str | None:
    """A failed attempt's reason reduced to its class: ``HTTP 503`` and ``timed out`` as
    they are, a client error to its type, any other (the SSRF guard's refusals, which
    name the address) to ``target refused``."""
    if why is None:
        return None
    if _PLAIN.match(why):
        return why
    found = _CLIENT_ERROR.match(why)
    if found:
        return f"connection failed ({found.group(1)})"
    return "target refused"


async def report(svc: Services) -> dict[str, Any]:
    """The report (``enabled`` false on a database without the outbox)."""
    found = await subscriptions(svc)
    if not found.get("enabled"):
        return {"enabled": False, "subscriptions": []}
    return {"enabled": True, "delivering": bool(found.get("delivering")), "subscriptions": [{
        "name": s["name"], "enabled": s["enabled"], "lag": s.get("lag"),
        "last_success_at": s.get("last_success_at"),
        "last_failure_at": s.get("last_failure_at"),
        "last_error": short_error(s.get("last_error")),
        "dead_letters": s.get("dead_letters"),
        "behind_retention": s.get("behind_retention"),
        # this replica holds the subscription's lease (ADR 0131): it is the one delivering
        "delivered_here": bool(s.get("running"))} for s in found["subscriptions"]]}
