"""Link writes: create and invalidate. Called by ``POST /v1/links`` and ``POST /v1/kg/invalidate``.

create: pre_link hook -> re-validate -> sign (custody, signature check, replay) -> insert +
graph mirror + audit event in one transaction -> post_link hook. Links are immutable;
invalidation only closes the validity window (pre_invalidate / post_invalidate); the
signed window stays in ``asserted_until`` so a signature still verifies afterwards.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from attested_cortex.attest.auditing import append_event
from attested_cortex.errors import InvalidInputError
from attested_cortex.service import attesting, hooking, recording
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.graph_commands import CreateLink, InvalidateLink
from attested_cortex.service.graph_views import link_view
from attested_cortex.service.kg import backend
from attested_cortex.store import links as link_rows
from attested_cortex.store.links import Link

log = logging.getLogger(__name__)


async def create(svc: Services, caller: Caller, cmd: CreateLink) -> Link:
    """Create a link observed by the calling agent, signed per the agent's key custody."""
    payload = await hooking.before(svc, caller, "pre_link", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(CreateLink, payload)
    plan = _plan(svc, caller, cmd)
    outcome = plan.outcome
    async with svc.db.transaction() as conn:
        link = await link_rows.create_link(
            conn, graph=backend(svc), src_id=cmd.src_id, dst_id=cmd.dst_id,
            relation=cmd.relation, observed_by=caller.agent_id, valid_from=plan.valid_from,
            valid_until=plan.valid_until, link_id=cmd.id, signature=outcome.signature,
            attest_level=outcome.level, signed_by=outcome.signed_by, signed_at=plan.signed_at,
        )
        await recording.record_link(svc, conn, caller, "link.recorded", link)
        if outcome.verified:  # last statement: the chain lock is held until commit
            await append_event(
                conn, agent_id=caller.agent_id, event_type="link.created",
                payload=plan.payload.encode(), signature=outcome.signature,
                key_fingerprint=outcome.key_fingerprint,
            )
    await hooking.after(svc, caller, "post_link", link_view(link), namespace=None)
    return link


def _plan(svc: Services, caller: Caller, cmd: CreateLink) -> attesting.SignedLinkPlan:
    try:
        return attesting.plan_link(
            keys=attesting.snapshot(svc.keys), agent_id=caller.agent_id, src_id=cmd.src_id,
            dst_id=cmd.dst_id, relation=cmd.relation, valid_from=cmd.valid_from,
            valid_until=cmd.valid_until, signature=cmd.signature,
        )
    except InvalidInputError as exc:
        if exc.code == "bad_signature":  # a structured warning: someone may be forging
            log.warning("rejected a link with a bad signature", extra={
                "agent_id": caller.agent_id, "warning": exc.details.get("warning"),
                "fingerprints_tried": exc.details.get("fingerprints_tried"),
                "payload_sha256": exc.details.get("payload_sha256")})
        raise


async def verify(svc: Services, caller: Caller, link_id: uuid.UUID) -> dict[str, Any]:
    """Re-verify a stored link's signature from its row and the keyring."""
    async with svc.db.connection() as conn:
        link = await link_rows.get_link(conn, link_id=link_id)
    return attesting.verification(link, attesting.snapshot(svc.keys))


async def invalidate(svc: Services, caller: Caller, cmd: InvalidateLink) -> Link:
    """Close a link's validity window (never deletes it)."""
    payload = await hooking.before(svc, caller, "pre_invalidate", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(InvalidateLink, payload)
    async with svc.db.transaction() as conn:
        link = await link_rows.invalidate_link(conn, graph=backend(svc), link_id=cmd.link_id,
                                               valid_until=cmd.valid_until)
        await recording.record_link(svc, conn, caller, "link.invalidated", link)
    await hooking.after(svc, caller, "post_invalidate", link_view(link), namespace=None)
    return link
