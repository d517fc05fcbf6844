"""The outbox event of a spoke-memory write (issue 41, ADR 0130): ``post_spoke_write``.

Every mutating op of the family commits through :func:`.receipts.mutate`, whose transaction
ends with the op's signed record (it takes the audit chain's lock). The event is appended
right after it, in that transaction, so a rolled-back op leaves none and sequence order stays
commit order (ADR 0106). Its payload is the one a ``post_spoke_write`` hook receives
(:func:`.hooks.post_payload`: op, space, principal, request, receipt); its key is the space
(the family's unit of ordering: a space's receipts, revisions and freezes are delivered in
the order they committed) and its namespace the space, so subscriptions filter it by name and
namespace pattern like a memory event.

The spoke side calls the core's outbox (:mod:`..pipeline.outboxing`), never the reverse
(ADR 0125): the core knows nothing of the family.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.hooks.payloads import payload
from attested_cortex.service.pipeline import outboxing
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.resources.spoke.views import wire
from attested_cortex.spoke.models import MemoryReceipt
from attested_cortex.store.database import Conn
from attested_cortex.store.outbox import OutboxEvent

EVENT: Final = "post_spoke_write"


def write_event(*, op: str, space_id: str, principal: str, request: dict[str, Any],
                receipt: MemoryReceipt) -> OutboxEvent:
    """The event of one committed spoke write (pure)."""
    return OutboxEvent(EVENT, f"space:{space_id}", space_id, payload(
        EVENT, op=op, space_id=space_id, principal=principal, request=request,
        receipt=wire(receipt)))


async def append_write(svc: Services, conn: Conn, **fields: Any) -> None:
    """Append the write's event in its transaction (after its record: under the chain lock),
    when the server writes the outbox."""
    await outboxing.append(svc, conn, [write_event(**fields)])
