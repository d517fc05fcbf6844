"""Authored profile documents: ``memory.profile.get`` and ``memory.profile.update``.
Profiles are trusted author material and grant nothing by themselves; an absent kind reads
honest-empty (revision 0, no text, no time). Called by :mod:`.dispatch`.
"""

from __future__ import annotations

import uuid
from typing import Any

from attested_cortex.errors import ConflictError
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke.ops import mutate_in
from attested_cortex.service.resources.spoke.receipts import Effect
from attested_cortex.service.resources.spoke.views import rendered
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want
from attested_cortex.spoke.models import ProfileDocument, Wire
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import candidates as rows


def profile_view(row: dict[str, Any]) -> ProfileDocument:
    return ProfileDocument(**{k: row[k] for k in (
        "space_id", "subject_id", "kind", "text", "revision", "updated_at", "schema_version",
        "extensions")})


async def profile_get(svc: Services, caller: Caller, req: rq.ProfileGet,
                      key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("profiles_read", req.subject_id))
        await gate.existing_subject(conn, req.space_id, req.subject_id)
        stored = {p.kind: p for p in rendered(
            await rows.profiles(conn, req.space_id, req.subject_id), profile_view, key="kind")}
    kinds = sorted(stored) if req.kinds is None else req.kinds
    return rq.ProfileAnswer(documents=[stored.get(kind) or ProfileDocument(
        space_id=req.space_id, subject_id=req.subject_id, kind=kind, text="", revision=0)
        for kind in kinds])


async def profile_update(svc: Services, caller: Caller, req: rq.ProfileUpdate,
                         key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(
            Want("profiles_write", req.subject_id))
        await gate.writable_space(conn, caller, req.space_id)
        await gate.open_subject(conn, req.space_id, req.subject_id, None)
        current = await rows.profile(conn, req.space_id, req.subject_id, req.kind)
        revision = 0 if current is None else current["revision"]
        if req.expected_revision is not None and req.expected_revision != revision:
            raise ConflictError(f"profile {req.kind} is at revision {revision}, not "
                                f"{req.expected_revision}", code="revision_conflict",
                                revision=revision, expected_revision=req.expected_revision)
        row = await rows.put_profile(conn, space_id=req.space_id, subject_id=req.subject_id,
                                     kind=req.kind, text=req.text, by=caller.agent_id)
        return Effect([req.kind], row["revision"])
    return await mutate_in(svc, caller, "memory.profile.update", req, key, effect)
