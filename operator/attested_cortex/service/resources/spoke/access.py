"""The family's grant check (ADR 0060 §4), run inside every op after the pipeline's scope
and rules steps, against the grants as they are now (so a revoked or expired grant stops the
very next op). Also the space and subject gates: a frozen space refuses writes
(``space_frozen``), a fenced or archived subject and a fenced context refuse writes
(``subject_fenced``, ``context_fenced``); reads go on. Called by :mod:`.ops` and
its siblings, and through :mod:`.native` by the core for a native write of a record
(:func:`native_write`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from attested_cortex.errors import ConflictError, DeniedError, NotFoundError
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.service.resources.spoke.views import Row, grant_view
from attested_cortex.spoke.coverage import Want, covers
from attested_cortex.spoke.models import Capability, MemoryGrant, Placement
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import memory as rows


@dataclass(frozen=True)
class Access:
    """A principal's standing in one space, read once per op."""

    principal: str
    authority: bool
    grants: tuple[MemoryGrant, ...]
    now: datetime

    def allows(self, want: Want) -> bool:
        return covers(authority=self.authority, grants=self.grants, want=want, now=self.now)

    def reads(self, capability: Capability, subject_id: str, placement: Placement) -> bool:
        """Whether a read through ``capability`` may show what a record at ``placement`` of
        ``subject_id`` holds: ``capability`` and ``records_read`` both cover it, so no read
        (recall, reflections, exports) shows what ``memory.records.get`` would answer 404
        (ADR 0082)."""
        return self.allows(Want(capability, subject_id, placement)) \
            and self.allows(Want("records_read", subject_id, placement))

    def require(self, want: Want) -> None:
        """403 ``grant_missing`` unless a live grant (or the authority) covers ``want``."""
        if self.allows(want):
            return
        where = (" at " + ("shared" if want.placement.shared else
                           f"context {want.placement.context_id}")) if want.placement else ""
        about = f" for subject {want.subject_id}" if want.subject_id else ""
        raise DeniedError(
            f"{self.principal} holds no live grant with {want.capability}{about}{where}; "
            "ask a principal that covers it for a grant", code="grant_missing",
            capability=want.capability, subject_id=want.subject_id, decision="deny")


def authority(caller: Caller, space_id: str) -> bool:
    """The space authority: native ``memory.override`` on the space's namespace."""
    return caller.scopes.allows("memory.override", space_id)


async def access(conn: Conn, caller: Caller, space_id: str) -> Access:
    """The caller's authority and live grants in ``space_id``."""
    return held(caller, space_id, await rows.grants(conn, space_id, caller.agent_id))


def held(caller: Caller, space_id: str, grants: list[Row]) -> Access:
    """The caller's standing from its grant rows (as :func:`access` reads them)."""
    return Access(caller.agent_id, authority(caller, space_id),
                  tuple(grant_view(r) for r in grants), datetime.now(UTC))


async def standing(conn: Conn, caller: Caller, space_id: str) -> tuple[Access, Row]:
    """The caller's standing and the space's row (404 ``space_not_found``), in one
    statement: what a read checks before it reads."""
    space, grants = await rows.space_and_grants(conn, space_id, caller.agent_id)
    return held(caller, space_id, grants), _found(space, space_id)


async def standing_of(conn: Conn, principal: str, is_authority: bool,
                      space_id: str) -> Access:
    """A principal's standing with its grants as they are now (the pending worker, which
    has no request, re-authorizes a job with the authority its request had)."""
    grants = tuple(grant_view(r) for r in await rows.grants(conn, space_id, principal))
    return Access(principal, is_authority, grants, datetime.now(UTC))


async def existing_space(conn: Conn, space_id: str, *, lock: bool = False) -> Row:
    """The space's row, or 404 ``space_not_found``."""
    return _found(await rows.space(conn, space_id, lock=lock), space_id)


def _found(space: Row | None, space_id: str) -> Row:
    if space is None:
        raise NotFoundError(f"space {space_id!r} does not exist; a principal with "
                            "memory.override on its namespace makes it by first use",
                            code="space_not_found", space_id=space_id)
    return space


async def writable_space(conn: Conn, caller: Caller, space_id: str) -> Row:
    """The space of a write, made on first use by its authority, locked; 409 if frozen."""
    if authority(caller, space_id):
        found = await rows.ensure_space(conn, space_id, caller.agent_id)
    else:
        found = await existing_space(conn, space_id, lock=True)
    if found["frozen"]:
        raise ConflictError(f"space {space_id!r} is frozen: reads go on, writes wait for "
                            "memory.spaces.unfreeze", code="space_frozen", space_id=space_id)
    return found


async def existing_subject(conn: Conn, space_id: str, subject_id: str, *,
                           lock: bool = False) -> Row:
    """The subject's row, or 404 ``subject_not_found``."""
    found = await rows.subject(conn, space_id, subject_id, lock=lock)
    if found is None:
        raise NotFoundError(f"subject {subject_id!r} does not exist in space {space_id!r}; "
                            "memory.subjects.ensure makes it", code="subject_not_found",
                            subject_id=subject_id)
    return found


def writable_subject(subject: Row, placement: Placement | None) -> None:
    """409 when the subject, or the placement's context, is fenced (or archived)."""
    if subject["state"] != "active":
        raise ConflictError(f"subject {subject['subject_id']!r} is {subject['state']}: "
                            "its memory takes no writes", code="subject_fenced",
                            state=subject["state"])
    if placement is not None and placement.context_id in subject["fenced_context_ids"]:
        raise ConflictError(f"context {placement.context_id!r} of subject "
                            f"{subject['subject_id']!r} is fenced", code="context_fenced",
                            context_id=placement.context_id)


async def open_subject(conn: Conn, space_id: str, subject_id: str,
                       placement: Placement | None) -> Row:
    """The write gate of a subject's memory, run by every path that writes one of its
    records or profiles (create, review, import; profile updates): the subject's row,
    locked to the transaction's end, or 404; 409 when it or the placement's context is
    fenced or archived (:func:`writable_subject`)."""
    subject = await existing_subject(conn, space_id, subject_id, lock=True)
    writable_subject(subject, placement)
    return subject


async def native_write(conn: Conn, memory_id: uuid.UUID) -> None:
    """The same gate for a native update or delete (``PATCH``/``DELETE /v1/memories/{id}``,
    the MCP tools) of a memory that is a spoke record: 409 ``space_frozen``,
    ``subject_fenced`` or ``context_fenced`` as the family's own writes answer; nothing for
    any other memory."""
    gate = await rows.record_gate(conn, memory_id)
    if gate is None:
        return
    if gate["frozen"]:
        raise ConflictError(f"space {gate['space_id']!r} is frozen: reads go on, writes wait "
                            "for memory.spaces.unfreeze", code="space_frozen",
                            space_id=gate["space_id"])
    context = gate["context_id"]
    writable_subject(gate, Placement(shared=True) if context is None
                     else Placement(context_id=context))


def live_grants(standing: Access) -> list[MemoryGrant]:
    """The standing's grants that still hold."""
    return [g for g in standing.grants if g.revoked_at is None
            and (g.expires_at is None or g.expires_at > standing.now)]


def amplification(principal: str) -> DeniedError:
    """403 of a grant wider than its issuer's own coverage."""
    return DeniedError(
        f"{principal} may not issue this grant: no live grant of its own with 'grants' "
        "contains it (capabilities, subjects, contexts, shared access and expiry)",
        code="grant_amplification", decision="deny")
