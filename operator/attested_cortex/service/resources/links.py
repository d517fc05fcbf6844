"""Link writes and checks: create, invalidate, verify. Called by ``POST /v1/links``,
``POST /v1/kg/invalidate`` and ``GET /v1/links/{id}/verify``.

create: pipeline (scope and rules on both ends' namespaces, pre_link) -> sign (custody,
signature check, replay) -> insert + graph mirror + write record (:mod:`..pipeline.write_records`)
+ signed audit event in one transaction -> post_link; an invalidation appends its write
record too. Links are immutable; invalidation only closes the validity window; the signed
window stays in ``asserted_until`` so a signature still verifies afterwards. Only the
observer invalidates a link unless granted more, and nobody closes another agent's link in
the past (retroactively).
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from attested_cortex.attest.auditing import append_event
from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.policy.decisions import ALLOW, Decision
from attested_cortex.service.pipeline import attesting, settling, write_records
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.pipeline.running import Call, Target, run
from attested_cortex.service.resources.graph_commands import CreateLink, InvalidateLink
from attested_cortex.service.resources.graph_views import link_view
from attested_cortex.service.resources.idempotency import AnswerKind
from attested_cortex.service.resources.kg import backend
from attested_cortex.store import links as link_rows
from attested_cortex.store import memories as memory_rows
from attested_cortex.store.links import Link

log = logging.getLogger(__name__)


async def ends_target(svc: Services, ids: list[uuid.UUID], owner: str | None = None) -> Target:
    """The namespaces of the memories a link joins (unknown ids are 404 later)."""
    async with svc.db.connection() as conn:
        found = await memory_rows.namespaces_of(conn, ids)
    return Target(tuple(sorted(set(found.values()))), owner)


@dataclass
class CreateCall(Call[Link]):
    """``POST /v1/links``: a link observed by the calling agent."""

    spec = ops.LINK_CREATE
    settles = True
    cmd: CreateLink

    async def target(self, svc: Services, caller: Caller) -> Target:
        return await ends_target(svc, [self.cmd.src_id, self.cmd.dst_id], caller.agent_id)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, **self.cmd.model_dump(mode="json"))

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        self.cmd = revalidate(CreateLink, {k: v for k, v in changed.items()
                                           if k in CreateLink.model_fields})

    async def execute(self, svc: Services, caller: Caller) -> Link:
        cmd = self.cmd
        plan = _plan(svc, caller, cmd)
        outcome = plan.outcome
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            link = await link_rows.create_link(
                conn, graph=backend(svc), src_id=cmd.src_id, dst_id=cmd.dst_id,
                relation=cmd.relation, observed_by=caller.agent_id, valid_from=plan.valid_from,
                valid_until=plan.valid_until,
                link_id=cmd.id or settling.chosen_id(self.settlement),
                signature=outcome.signature, attest_level=outcome.level,
                signed_by=outcome.signed_by, signed_at=plan.signed_at,
                by=write_records.written_by(caller),
            )
            await write_records.record_link(svc, conn, caller, "link.recorded", link)
            if outcome.verified:  # last statement: the chain lock is held until commit
                await append_event(
                    conn, agent_id=caller.agent_id, event_type="link.created",
                    payload=plan.payload.encode(), signature=outcome.signature,
                    key_fingerprint=outcome.key_fingerprint,
                )
        return link

    def post_payload(self, event: EventName, result: Link) -> dict[str, Any]:
        return payload(event, **link_view(result))


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


@dataclass
class VerifyCall(Call[dict[str, Any]]):
    """``GET /v1/links/{id}/verify``: re-verify a stored link from its row and the keyring."""

    spec = ops.LINK_VERIFY
    link_id: uuid.UUID
    link: Link | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        async with svc.db.connection() as conn:
            self.link = await link_rows.get_link(conn, link_id=self.link_id)
        return await ends_target(svc, [self.link.src_id, self.link.dst_id])

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        assert self.link is not None
        return attesting.verification(self.link, attesting.snapshot(svc.keys))


@dataclass
class InvalidateCall(Call[Link]):
    """``POST /v1/kg/invalidate``: close a link's validity window (never delete it)."""

    spec = ops.LINK_INVALIDATE
    settles = True
    cmd: InvalidateLink
    link: Link | None = None
    now: datetime | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        self.now = datetime.now(UTC)
        async with svc.db.connection() as conn:
            self.link = await link_rows.get_link(conn, link_id=self.cmd.link_id)
        return await ends_target(svc, [self.link.src_id, self.link.dst_id],
                                 self.link.observed_by)

    def check(self, svc: Services, caller: Caller, target: Target) -> Decision:
        """Nobody rewrites another agent's past: closing its link before now is refused."""
        until, now = self.cmd.valid_until, self.now
        if target.owner == caller.agent_id or until is None or now is None or until >= now:
            return ALLOW
        return Decision("deny", "ownership",
                        f"closing {target.owner}'s link at {until.isoformat()}, in the past, "
                        "would rewrite what it asserted; only its observer may do that",
                        "retroactive_invalidation")

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, **self.cmd.model_dump(mode="json"))

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        self.cmd = revalidate(InvalidateLink, {k: v for k, v in changed.items()
                                               if k in InvalidateLink.model_fields})

    async def execute(self, svc: Services, caller: Caller) -> Link:
        if self.cmd.link_id != (self.link.id if self.link else None):
            raise InvalidInputError("a hook may not change which link is invalidated",
                                    code="hook_invalid_modify", field="link_id")
        check = self.check(svc, caller, Target(owner=self.link.observed_by if self.link
                                               else None))
        if not check.allows:  # a hook moved valid_until into the past
            raise InvalidInputError(check.reason or "retroactive", code=check.code)
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            current = await link_rows.get_link(conn, link_id=self.cmd.link_id)
            if current.valid_until is None:  # an invalidated one is refused as before
                await write_records.require_recorded_link(conn, current)  # ADR 0018
            link = await link_rows.invalidate_link(conn, graph=backend(svc),
                                                   link_id=self.cmd.link_id,
                                                   valid_until=self.cmd.valid_until,
                                                   by=write_records.written_by(caller))
            await write_records.record_link(svc, conn, caller, "link.invalidated", link)
        return link

    def post_payload(self, event: EventName, result: Link) -> dict[str, Any]:
        return payload(event, **link_view(result))


async def create(svc: Services, caller: Caller, cmd: CreateLink) -> Link:
    """Create a link observed by the calling agent, signed per the agent's key custody."""
    return await run(svc, caller, CreateCall(cmd))


async def verify(svc: Services, caller: Caller, link_id: uuid.UUID) -> dict[str, Any]:
    """Re-verify a stored link's signature from its row and the keyring."""
    return await run(svc, caller, VerifyCall(link_id))


async def invalidate(svc: Services, caller: Caller, cmd: InvalidateLink) -> Link:
    """Close a link's validity window (never deletes it)."""
    return await run(svc, caller, InvalidateCall(cmd))


async def _written(svc: Services, link_id: uuid.UUID) -> Link:
    async with svc.db.connection() as conn:
        return await link_rows.get_link(conn, link_id=link_id)


#: The answer of a keyed link creation or invalidation (ADR 0030): the link as written.
LINK = AnswerKind[Link]("link", lambda _svc, link: link_view(link), _written)
