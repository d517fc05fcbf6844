"""Transfer of the spoke-memory family (flag ``spoke-memory-transfer``):
``memory.exports.create``/``.get`` and ``memory.imports.stage``/``.activate``/``.discard``.
Called by :mod:`.dispatch`; the format is the logical bundle's with the ``space``
content kind (ADR 0070, :mod:`attested_cortex.bundles.spaces`).

Everything needs ``transfer``. An export holds what the exporter's ``transfer`` grants cover
and it reads (ADR 0082: live records its ``records_read`` also covers, their subjects, and
the profiles of those subjects its ``profiles_read`` covers); it is built and stored at once, so
its receipt commits (``refs: [export_id]``), unless it covers more records than the
server's bound: then the receipt answers ``pending`` and the pending worker builds it
(ADR 0069; ``memory.receipts.get`` reads the export id once committed). Each chunk is
fetched by ordinal with the manifest digest, by the export's creator (or the space
authority) only. An import stages
chunks in strict ordinal order from 0 (a gap is 409 ``import_gap``, a replay 409
``chunk_replayed``, a bad digest 400 ``chunk_corrupt``) and verifies the manifest digest and
the document on the final chunk (409 ``manifest_mismatch`` / ``bundle_invalid``, the final
chunk refused and the rest kept). Activation writes the subjects, records (new ids, each
with its chain record and counted in the activator's quota) and profiles into the empty
target space and bumps its ``authority_generation`` in one transaction: nothing staged is
visible before it. A discard before activation drops the staged chunks.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import uuid
from typing import Any

from attested_cortex.bundles import manifests, spaces
from attested_cortex.bundles.errors import BundleError
from attested_cortex.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    TooLargeError,
)
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources.spoke import access as gate
from attested_cortex.service.resources.spoke.ops import NewRecord, insert_record, mutate_in
from attested_cortex.service.resources.spoke.reading import placement_of
from attested_cortex.service.resources.spoke.receipts import Effect
from attested_cortex.service.workers.pending_receipts import Outcome
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.coverage import Want
from attested_cortex.spoke.models import (
    Content,
    MemoryExportChunk,
    MemoryReceipt,
    Placement,
    Wire,
)
from attested_cortex.store.database import Conn
from attested_cortex.store.spoke import candidates as listing
from attested_cortex.store.spoke import memory as rows
from attested_cortex.store.spoke import pending as pending
from attested_cortex.store.spoke import transfer as transfer


async def _covered(conn: Conn, standing: gate.Access, space_id: str) -> list[Any]:
    """The keys of the space's live records the standing's ``transfer`` and
    ``records_read`` cover (an export shows no record ``records.get`` would not, ADR 0082)."""
    return [k for k in await listing.record_keys(conn, space_id, None)
            if standing.reads("transfer", k["subject_id"], placement_of(k))]


async def _document(conn: Conn, standing: gate.Access, space_id: str,
                    keys: list[Any]) -> dict[str, Any]:
    """The export's document: the records of ``keys``, their subjects, and the profiles of
    those subjects that ``standing`` reads (``profiles_read``, as ``memory.profile.get``)."""
    records = await rows.records_by_id(conn, space_id, [k["memory_id"] for k in keys])
    subjects = sorted({r["subject_id"] for r in records})
    found = [await rows.subject(conn, space_id, s) for s in subjects]
    profiles = [p for s in subjects if standing.allows(Want("profiles_read", s))
                for p in await listing.profiles(conn, space_id, s)]
    return {
        "subjects": [{"subject_id": s["subject_id"], "kind": s["kind"]}
                     for s in found if s is not None],
        "records": [{"subject_id": r["subject_id"], "kind": r["kind"],
                     "context_id": r["context_id"], "source_context_id": r["source_context_id"],
                     "content": _content(r)} for r in records],
        "profiles": [{"subject_id": p["subject_id"], "kind": p["kind"], "text": p["text"]}
                     for p in profiles]}


def _content(row: dict[str, Any]) -> dict[str, Any]:
    present = {"text": row["text"]}
    for name in ("structured", "cognition"):
        if row[name] is not None:
            present[name] = row[name]
    return present


def grants_digest(standing: gate.Access) -> str | None:
    """The digest of the live grants an export is built under (None for the authority,
    whose coverage is the space): a fetch by a creator whose live grants differ now is
    refused, as a cursor is (ADR 0082)."""
    if standing.authority:
        return None
    ids = sorted(str(g.grant_id) for g in gate.live_grants(standing))
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


async def _export(conn: Conn, standing: gate.Access, space: dict[str, Any], keys: list[Any],
                  chunk_bytes: int) -> uuid.UUID:
    """Build and store an export of the records of ``keys`` for ``standing``; its id."""
    files = spaces.space_files(await _document(conn, standing, space["space_id"], keys))
    chunks, manifest_digest = spaces.wire_chunks(files, chunk_bytes)
    export_id = uuid.uuid4()
    await transfer.insert_export(conn, {
        "export_id": export_id, "space_id": space["space_id"], "chunk_count": len(chunks),
        "manifest_digest": manifest_digest,
        "authority_generation": space["authority_generation"],
        "created_by": standing.principal, "grants_digest": grants_digest(standing)}, chunks)
    return export_id


async def exports_create(svc: Services, caller: Caller, req: rq.ExportCreate,
                         key: str | None) -> Wire:
    """An export, built at once; one of more records than the server's bound answers
    ``pending`` and is built by the pending worker (ADR 0069, :func:`export_job`)."""
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        standing = await gate.access(conn, caller, req.space_id)
        standing.require(Want("transfer"))
        space = await gate.existing_space(conn, req.space_id)
        keys = await _covered(conn, standing, req.space_id)
        if svc.pending is not None and len(keys) > svc.pending.export_pending_records:
            await pending.enqueue(conn, receipt_id=receipt, kind="export",
                                  space_id=req.space_id, principal=caller.agent_id,
                                  payload={"authority": standing.authority,
                                           "chunk_bytes": req.chunk_bytes})
            return Effect(status="pending")
        export_id = await _export(conn, standing, space, keys, req.chunk_bytes)
        return Effect([str(export_id)], space["authority_generation"])
    answer = await mutate_in(svc, caller, "memory.exports.create", req, key, effect)
    if svc.pending is not None and isinstance(answer, MemoryReceipt) \
            and answer.status == "pending":
        svc.pending.wake()
    return answer


async def export_job(conn: Conn, work: dict[str, Any]) -> Outcome:
    """The pending worker's handler of an export: re-authorized with the exporter's grants
    as they are now (and the authority its request had), built over the space as it is when
    the job runs (one transaction: one snapshot of the space's rows)."""
    space_id, principal = work["space_id"], work["principal"]
    standing = await gate.standing_of(conn, principal, bool(work["payload"]["authority"]),
                                      space_id)
    if not standing.allows(Want("transfer")):
        return Outcome.failed("grant_missing", f"{principal} no longer holds a live grant "
                              "with transfer in this space")
    space = await rows.space(conn, space_id)
    if space is None:
        return Outcome.failed("space_not_found", f"space {space_id!r} no longer exists")
    keys = await _covered(conn, standing, space_id)
    export_id = await _export(conn, standing, space, keys, int(work["payload"]["chunk_bytes"]))
    return Outcome("committed", [str(export_id)], space["authority_generation"])


async def exports_get(svc: Services, caller: Caller, req: rq.ExportChunkRef,
                      key: str | None) -> Wire:
    async with svc.db.connection() as conn:
        standing = await gate.access(conn, caller, req.space_id)
        standing.require(Want("transfer"))
        row = await transfer.export_chunk(conn, req.space_id, req.export_id, req.ordinal)
    # an export holds what its creator's grants cover: only the creator (or the authority)
    # fetches it, so a narrower transfer grant cannot read a wider export
    if row is not None and row["created_by"] != caller.agent_id and not standing.authority:
        row = None
    if row is None:
        raise NotFoundError(f"export {req.export_id} has no chunk {req.ordinal} in this space",
                            code="export_chunk_not_found")
    built = row["grants_digest"]
    if built is not None and not standing.authority and built != grants_digest(standing):
        raise ConflictError(f"export {req.export_id} was built under grants of yours that "
                            "changed since (revoked, expired or new): export again",
                            code="export_stale")
    return MemoryExportChunk(
        export_id=row["export_id"], ordinal=row["ordinal"],
        final=row["ordinal"] == row["chunk_count"] - 1,
        data=base64.b64encode(bytes(row["data"])).decode(), digest=row["digest"],
        manifest_digest=row["manifest_digest"])


def _decoded(req: rq.ImportStage) -> bytes:
    try:
        data = base64.b64decode(req.data.encode(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidInputError("data is not base64", field="request.data") from exc
    if manifests.digest(data) != req.digest:
        raise InvalidInputError(f"chunk {req.ordinal} does not match its digest",
                                code="chunk_corrupt", field="request.data", ordinal=req.ordinal)
    return data


async def imports_stage(svc: Services, caller: Caller, req: rq.ImportStage,
                        key: str | None) -> Wire:
    data = _decoded(req)

    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(Want("transfer"))
        await gate.writable_space(conn, caller, req.space_id)
        row = await transfer.staged(conn, req.space_id, req.import_id)
        if row is None and req.ordinal == 0:
            row = await transfer.begin_import(conn, req.space_id, req.import_id,
                                              caller.agent_id)
        _in_order(row, req)
        await _within_bounds(svc, conn, caller, req, len(data))
        await transfer.stage_chunk(conn, req.import_id, req.ordinal, data, req.digest)
        if req.final:
            await _verify(conn, req)
        return Effect([str(req.import_id)])
    return await mutate_in(svc, caller, "memory.imports.stage", req, key, effect)


def _in_order(row: dict[str, Any] | None, req: rq.ImportStage) -> None:
    if row is None or req.ordinal > row["next_ordinal"]:
        raise ConflictError(f"chunk {req.ordinal} arrived before chunk "
                            f"{0 if row is None else row['next_ordinal']}: stage in order",
                            code="import_gap")
    if row["state"] != "staging":
        raise ConflictError(f"import {req.import_id} is {row['state']}: it stages no more",
                            code="import_not_staging", state=row["state"])
    if req.ordinal < row["next_ordinal"]:
        raise ConflictError(f"chunk {req.ordinal} was already staged", code="chunk_replayed")


async def _within_bounds(svc: Services, conn: Conn, caller: Caller, req: rq.ImportStage,
                         adds: int) -> None:
    """413 when the chunk would take the import past ``limits.max_import_bytes`` or the
    caller's staged imports past ``limits.max_staged_bytes_per_agent`` (ADR 0084)."""
    this, agent = await transfer.staged_bytes(conn, req.import_id, caller.agent_id)
    limits = svc.limits
    if this + adds > limits.max_import_bytes:
        raise TooLargeError(f"import {req.import_id} would stage {this + adds} bytes; one "
                            f"import stages at most {limits.max_import_bytes}",
                            code="import_too_large", limit=limits.max_import_bytes)
    if agent + adds > limits.max_staged_bytes_per_agent:
        raise TooLargeError(f"{caller.agent_id} would hold {agent + adds} bytes staged over "
                            f"its open imports; at most {limits.max_staged_bytes_per_agent}: "
                            "activate or discard one first", code="staged_bytes_exceeded",
                            limit=limits.max_staged_bytes_per_agent)


async def _verify(conn: Conn, req: rq.ImportStage) -> None:
    if req.manifest_digest is None:
        raise ConflictError("the final chunk names no manifest_digest: give the export's",
                            code="manifest_mismatch")
    await _staged_document(conn, req.import_id, req.manifest_digest)
    await transfer.set_import(conn, req.import_id, state="verified",
                              manifest_digest=req.manifest_digest)


async def _staged_document(conn: Conn, import_id: uuid.UUID,
                           manifest_digest: str) -> dict[str, Any]:
    """The staged bundle, reassembled and verified (:func:`.spaces.read_space`)."""
    chunks = await transfer.staged_chunks(conn, import_id)
    try:
        return spaces.read_space(b"".join(bytes(c["data"]) for c in chunks), manifest_digest)
    except BundleError as exc:
        if exc.what == "manifest_mismatch":
            raise ConflictError("the staged chunks do not make the export named by "
                                "manifest_digest", code="manifest_mismatch") from exc
        raise ConflictError(f"the staged export is not valid: {exc}", code="bundle_invalid",
                            what=exc.what, where=exc.where) from exc


async def imports_activate(svc: Services, caller: Caller, req: rq.ImportRef,
                           key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        standing = await gate.access(conn, caller, req.space_id)
        standing.require(Want("transfer"))
        await gate.writable_space(conn, caller, req.space_id)
        row = await _import(conn, req)
        if row["state"] != "verified":
            raise ConflictError(f"import {req.import_id} is {row['state']}; only a verified "
                                "import activates", code="import_not_verified")
        if await transfer.count_records(conn, req.space_id):
            raise ConflictError(f"space {req.space_id!r} already holds records: an import "
                                "activates into an empty space", code="space_not_empty")
        await _apply(svc, conn, caller, standing, req.space_id,
                     await _staged_document(conn, req.import_id, row["manifest_digest"]))
        await transfer.set_import(conn, req.import_id, state="activated")
        return Effect([str(req.import_id)], await transfer.bump_generation(conn, req.space_id))
    return await mutate_in(svc, caller, "memory.imports.activate", req, key, effect)


async def _import(conn: Conn, req: rq.ImportRef) -> dict[str, Any]:
    row = await transfer.staged(conn, req.space_id, req.import_id)
    if row is None:
        raise NotFoundError(f"import {req.import_id} does not exist in this space",
                            code="import_not_found")
    return row


async def _apply(svc: Services, conn: Conn, caller: Caller, standing: gate.Access,
                 space_id: str, document: dict[str, Any]) -> None:
    """Write the document; every record within the activator's ``transfer`` coverage."""
    try:
        for subject in document["subjects"]:
            standing.require(Want("transfer", subject["subject_id"]))
            await rows.ensure_subject(conn, space_id, subject["subject_id"], subject["kind"])
        for record in document["records"]:
            context = record["context_id"]
            placement = Placement(shared=True) if context is None else Placement(
                context_id=context)
            standing.require(Want("transfer", record["subject_id"], placement))
            await insert_record(svc, conn, caller, NewRecord(
                space_id, record["subject_id"], record["kind"], Content(**record["content"]),
                placement, record["source_context_id"]))
        for profile in document["profiles"]:
            standing.require(Want("transfer", profile["subject_id"]))
            await gate.open_subject(conn, space_id, profile["subject_id"], None)
            await listing.put_profile(conn, space_id=space_id, subject_id=profile["subject_id"],
                                      kind=profile["kind"], text=profile["text"],
                                      by=caller.agent_id)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConflictError(f"the staged export is not valid: {exc}",
                            code="bundle_invalid") from exc


async def imports_discard(svc: Services, caller: Caller, req: rq.ImportRef,
                          key: str | None) -> Wire:
    async def effect(conn: Conn, receipt: uuid.UUID) -> Effect:
        (await gate.access(conn, caller, req.space_id)).require(Want("transfer"))
        row = await _import(conn, req)
        if row["state"] not in ("staging", "verified"):
            raise ConflictError(f"import {req.import_id} is {row['state']}: only a staged "
                                "import is discarded", code="import_not_staging",
                                state=row["state"])
        await transfer.set_import(conn, req.import_id, state="discarded")
        return Effect([str(req.import_id)])
    return await mutate_in(svc, caller, "memory.imports.discard", req, key, effect)
