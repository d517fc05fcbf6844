"""Link writes: create and invalidate. Called by ``POST /v1/links`` and ``POST /v1/kg/invalidate``.

create: pre_link hook -> re-validate -> (attestation) -> insert + graph mirror (+ audit event)
in one transaction -> post_link hook. Links are immutable; invalidation only closes the
validity window (pre_invalidate / post_invalidate).
"""

from __future__ import annotations

from attested_cortex.service import hooking
from attested_cortex.service.context import Caller, Services
from attested_cortex.service.graph_commands import CreateLink, InvalidateLink
from attested_cortex.service.graph_views import link_view
from attested_cortex.service.kg import backend
from attested_cortex.store import links as link_rows
from attested_cortex.store.links import Link


async def create(svc: Services, caller: Caller, cmd: CreateLink) -> Link:
    """Create a link observed by the calling agent."""
    payload = await hooking.before(svc, caller, "pre_link", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(CreateLink, payload)
    async with svc.db.transaction() as conn:
        link = await link_rows.create_link(
            conn, graph=backend(svc), src_id=cmd.src_id, dst_id=cmd.dst_id,
            relation=cmd.relation, observed_by=caller.agent_id, valid_from=cmd.valid_from,
            valid_until=cmd.valid_until,
        )
    await hooking.after(svc, caller, "post_link", link_view(link), namespace=None)
    return link


async def invalidate(svc: Services, caller: Caller, cmd: InvalidateLink) -> Link:
    """Close a link's validity window (never deletes it)."""
    payload = await hooking.before(svc, caller, "pre_invalidate", cmd.model_dump(mode="json"),
                                   namespace=None)
    cmd = hooking.revalidate(InvalidateLink, payload)
    async with svc.db.transaction() as conn:
        link = await link_rows.invalidate_link(conn, graph=backend(svc), link_id=cmd.link_id,
                                               valid_until=cmd.valid_until)
    await hooking.after(svc, caller, "post_invalidate", link_view(link), namespace=None)
    return link
