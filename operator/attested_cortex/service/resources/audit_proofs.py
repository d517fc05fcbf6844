"""The audit tree over the API (issue 40, ADR 0099): the latest signed checkpoint, an
event's inclusion proof and the consistency proof between two tree sizes, through the
operation pipeline (scope ``audit.read``). Called by ``server/routes/audit.py`` and the MCP
tools. Hashes travel as standard base64, as in the C2SP formats.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from attested_cortex.attest import checkpointing
from attested_cortex.errors import NotFoundError
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.running import Call, run
from attested_cortex.service.resources.queries import ConsistencyQuery, ProofQuery
from attested_cortex.service.workers.checkpointing import Checkpointer
from attested_cortex.store import checkpoints as store
from attested_cortex.store.checkpoints import CheckpointRow


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def _checkpointer(svc: Services) -> Checkpointer:
    if svc.checkpointer is None:
        raise NotFoundError("this cortex signs no checkpoints: it has no audit_signer",
                            code="no_checkpoints")
    return svc.checkpointer


def checkpoint_view(row: CheckpointRow, log_key: str | None) -> dict[str, Any]:
    """A checkpoint as the API answers it (the note is the signed text itself)."""
    return {"origin": row.origin, "size": row.size, "root_hash": _b64(row.root),
            "note": row.note, "created_at": row.created_at.isoformat(), "log_key": log_key}


async def latest_checkpoint(svc: Services, *, covering: int = 0) -> CheckpointRow:
    """The latest checkpoint; one is cut now when none exists or it does not reach
    ``covering`` (an event already appended)."""
    checkpointer = _checkpointer(svc)
    async with svc.db.connection() as conn:
        row = await store.latest(conn)
        if row is not None and row.size >= covering:
            return row
        head = await store.head_size(conn)
    if head >= max(covering, 1):
        row = await checkpointer.cut_now()
    if row is None or row.size < covering:
        raise NotFoundError(f"no event {covering} in the chain yet" if covering
                            else "the audit chain is empty: no checkpoint yet",
                            code="not_checkpointed")
    return row


def log_key(svc: Services) -> str | None:
    verifier = _checkpointer(svc).verifier()
    return None if verifier is None else verifier.vkey()


@dataclass
class CheckpointCall(Call[dict[str, Any]]):
    """The latest signed checkpoint (C2SP tlog-checkpoint signed note)."""

    spec = ops.AUDIT_CHECKPOINT

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        row = await latest_checkpoint(svc)
        async with svc.db.connection() as conn:
            lines = await store.cosignatures(conn, row.size)
        view = checkpoint_view(row, log_key(svc))
        view["note"] = row.note + "".join(f"{line}\n" for line in lines)
        view["cosignatures"] = len(lines)
        return view


@dataclass
class ProofCall(Call[dict[str, Any]]):
    """An event's inclusion proof in a checkpointed tree."""

    spec = ops.AUDIT_PROOF
    query: ProofQuery

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        latest = await latest_checkpoint(svc, covering=self.query.seq)
        size = self.query.size or latest.size
        async with svc.db.connection() as conn:
            found = await checkpointing.inclusion(conn, sequence=self.query.seq, size=size,
                                                  covered=latest.size)
            at = latest if size == latest.size else await store.at_size(conn, size)
        return {"seq": found.sequence, "leaf_index": found.sequence - 1, "tree_size": size,
                "leaf_hash": _b64(found.leaf), "root_hash": _b64(found.root),
                "proof": [_b64(h) for h in found.proof],
                "checkpoint": None if at is None else at.note}


@dataclass
class ConsistencyCall(Call[dict[str, Any]]):
    """The proof that a larger checkpointed tree extends a smaller one."""

    spec = ops.AUDIT_CONSISTENCY
    query: ConsistencyQuery

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        new = self.query.to or (await latest_checkpoint(svc)).size
        old = self.query.from_
        async with svc.db.connection() as conn:
            proof = await checkpointing.consistency(conn, old=old, new=new)
            old_root = await checkpointing.root_at(conn, min(old, new))
            new_root = await checkpointing.root_at(conn, new)
        return {"from": old, "to": new, "from_root": _b64(old_root), "to_root": _b64(new_root),
                "proof": [_b64(h) for h in proof]}


async def checkpoint(svc: Services, caller: Caller) -> dict[str, Any]:
    """``GET /v1/audit/checkpoint``."""
    return await run(svc, caller, CheckpointCall())


async def proof(svc: Services, caller: Caller, query: ProofQuery) -> dict[str, Any]:
    """``GET /v1/audit/proof?seq=``."""
    return await run(svc, caller, ProofCall(query))


async def consistency(svc: Services, caller: Caller, query: ConsistencyQuery
                      ) -> dict[str, Any]:
    """``GET /v1/audit/consistency?from=&to=``."""
    return await run(svc, caller, ConsistencyCall(query))
