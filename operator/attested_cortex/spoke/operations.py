"""The 33 ``memory.*`` operations, declared once: flag, request type, answer type, whether
the op mutates (then it answers a :class:`~.models.MemoryReceipt`) and whether it may
answer ``pending`` (seed 001: only reflection generation, export creation, the final
staging chunk and import activation). Pure data; the dispatch reads it before any handler.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, cast

from attested_cortex.errors import InvalidInputError
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.models import (
    Flag,
    MemoryCandidate,
    MemoryExportChunk,
    MemoryReceipt,
    Subject,
    Wire,
)

CORE: Final[Flag] = "spoke-memory"
REFLECTION: Final[Flag] = "spoke-memory-reflection"
TRANSFER: Final[Flag] = "spoke-memory-transfer"
FLAGS: Final[tuple[Flag, ...]] = (CORE, REFLECTION, TRANSFER)


@dataclass(frozen=True)
class MemoryOp:
    """One declared family operation."""

    name: str
    flag: Flag
    request: type[Wire]
    answer: type[Wire]
    mutating: bool
    may_pend: bool = False

    def __post_init__(self) -> None:
        if self.mutating and self.answer is not MemoryReceipt:
            raise ValueError(f"{self.name}: a mutating op answers a MemoryReceipt")


def _read(name: str, request: type[Wire], answer: type[Wire], flag: Flag = CORE) -> MemoryOp:
    return MemoryOp(name, flag, request, answer, mutating=False)


def _write(name: str, request: type[Wire], flag: Flag = CORE, *,
           may_pend: bool = False) -> MemoryOp:
    return MemoryOp(name, flag, request, MemoryReceipt, mutating=True, may_pend=may_pend)


_TABLE: Final = (
    _read("memory.describe", rq.Empty, rq.DescribeAnswer),
    _read("memory.spaces.list", rq.Empty, rq.SpaceList),
    _write("memory.spaces.freeze", rq.SpaceRevision),
    _write("memory.spaces.unfreeze", rq.SpaceRevision),
    _write("memory.subjects.ensure", rq.SubjectEnsure),
    _read("memory.subjects.get", rq.SubjectRef, Subject),
    _write("memory.subjects.fence", rq.SubjectFence),
    _read("memory.grants.list", rq.GrantsList, rq.GrantList),
    _write("memory.grants.grant", rq.GrantIssue),
    _write("memory.grants.revoke", rq.GrantRevoke),
    _write("memory.capture", rq.Capture),
    _read("memory.candidates.list", rq.CandidatesList, rq.CandidateList),
    _read("memory.candidates.get", rq.CandidateRef, MemoryCandidate),
    _write("memory.candidates.dismiss", rq.CandidateRef),
    _write("memory.candidates.review", rq.Review),
    _write("memory.records.create", rq.RecordCreate),
    _read("memory.records.get", rq.RecordRead, rq.RecordAnswer),
    _write("memory.records.update", rq.RecordUpdate),
    _write("memory.records.delete", rq.RecordDelete),
    _read("memory.records.list", rq.RecordsList, rq.RecordPage),
    _write("memory.records.promote", rq.RecordPromote),
    _read("memory.recall", rq.Recall, rq.RecallAnswer),
    _read("memory.profile.get", rq.ProfileGet, rq.ProfileAnswer),
    _write("memory.profile.update", rq.ProfileUpdate),
    _read("memory.receipts.get", rq.ReceiptRef, MemoryReceipt),
    _read("memory.reflections.state", rq.ReflectionsRequest, rq.ReflectionState, REFLECTION),
    _read("memory.reflections.list", rq.ReflectionsRequest, rq.ReflectionList, REFLECTION),
    _write("memory.reflections.generate", rq.ReflectionsRequest, REFLECTION, may_pend=True),
    _write("memory.exports.create", rq.ExportCreate, TRANSFER, may_pend=True),
    _read("memory.exports.get", rq.ExportChunkRef, MemoryExportChunk, TRANSFER),
    _write("memory.imports.stage", rq.ImportStage, TRANSFER, may_pend=True),
    _write("memory.imports.activate", rq.ImportRef, TRANSFER, may_pend=True),
    _write("memory.imports.discard", rq.ImportRef, TRANSFER),
)

#: Every family operation by name, in the seed's order.
MEMORY_OPS: Final[dict[str, MemoryOp]] = {op.name: op for op in _TABLE}


def negotiate(named: Iterable[str] | None, *, field: str) -> frozenset[Flag]:
    """The flags a request negotiates (ADR 0061): none named is ``spoke-memory`` alone; each
    must be known, and a sub-flag comes with ``spoke-memory`` (400 ``invalid_input`` on
    ``field``: the HTTP header, or the MCP tool's ``capabilities``)."""
    if named is None:
        return frozenset({CORE})
    wanted = {part.strip() for part in named if part.strip()}
    unknown = sorted(wanted - set(FLAGS))
    if unknown:
        raise InvalidInputError(f"{field} names unknown flags {unknown}; known: "
                                f"{', '.join(FLAGS)}", field=field)
    if wanted and CORE not in wanted:
        raise InvalidInputError(f"{field}: a sub-flag is negotiated with {CORE}", field=field)
    return frozenset(cast(Flag, n) for n in wanted)
