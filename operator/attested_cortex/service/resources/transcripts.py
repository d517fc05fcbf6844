"""Transcript operations: store one (``POST /v1/transcripts``), replay what a memory cites
(``GET /v1/memories/{id}/replay``), and check the spans a new memory cites. Called by the
HTTP routes (:mod:`attested_cortex.server.routes.transcripts`), by
:mod:`.memories` (a store with ``citations``) and, through one registry entry each, by MCP
tools: :func:`store_transcript` and :func:`replay` take the pydantic inputs of
:mod:`.transcript_commands`.

Both run through :func:`..pipeline.running.run`. A store fires ``pre_transcript_store`` (a Modify of
content, metadata or namespace is re-validated and re-targeted: a redaction hook masks
credentials before a byte is compressed) and ``post_transcript_store``. It is refused (403
``transcripts_disabled``) in a namespace the retention policy does not open, 413 past
``max_bytes`` (an imported frame is inflated streaming, within the same bound). A replay is
a read of the memory and of every cited transcript's namespace (scopes and rules apply to
each) and, like a change, is the memory author's unless a scope or rule grants more.
Stored frames are inflated within the size recorded at store time, so a frame altered in
the database never inflates past what was stored: its citations read ``unreadable``.
A store counts its compressed frame and metadata against the owner's storage quota (the
frame is made before the quota step, once the hooks are done with the content) and appends
its ``transcript.stored`` write record in its transaction (:mod:`..pipeline.write_records`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

from attested_cortex.attest import sealing
from attested_cortex.attest.sealing import Sealer
from attested_cortex.errors import DeniedError, InvalidInputError, NotFoundError, TooLargeError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.jsonbounds import parse
from attested_cortex.policy.decisions import ALLOW, Decision
from attested_cortex.service.pipeline import operations as ops
from attested_cortex.service.pipeline import settling, write_records
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.pipeline.running import Call, Target, run
from attested_cortex.service.resources.commands import Cite, check_sizes
from attested_cortex.service.resources.idempotency import AnswerKind
from attested_cortex.service.resources.transcript_commands import ReplayMemory, StoreTranscript
from attested_cortex.store import memories as memory_rows
from attested_cortex.store import transcripts as rows
from attested_cortex.store.database import Conn
from attested_cortex.store.memories import Memory
from attested_cortex.store.transcripts import Citation, Transcript
from attested_cortex.transcripts import framing, spans
from attested_cortex.transcripts.retention import Retention, state_of

#: Compress or inflate off the event loop past this many bytes (zstd level 3 compresses
#: about 200 MB/s on one core: docs/benchmarks/transcripts.json).
_THREAD_BYTES = 256 * 1024
#: The most text the transcripts one memory cites may hold together (their sizes when
#: stored): a replay inflates each of them whole, and 64 citations of 1 MiB transcripts were
#: one 64 MB answer and over 1 GB of server memory asked over MCP. At least one whole
#: transcript of ``max_bytes`` always fits (:func:`replay_budget`).
REPLAY_MIN_BYTES: Final = 8 * 1024 * 1024


def replay_budget(svc: Services) -> int:
    """The bytes of cited transcript text one memory may cite and one replay inflates."""
    return max(REPLAY_MIN_BYTES, retention_of(svc).max_bytes)


def _cited_bytes(distinct: Iterable[Transcript]) -> int:
    """What a replay inflates for these (distinct) transcripts: each not pruned one whole."""
    return sum(t.raw_bytes for t in distinct if t.pruned_at is None)


def retention_of(svc: Services) -> Retention:
    """The server's transcript policy (off when none was configured)."""
    return svc.transcripts.retention if svc.transcripts is not None else Retention()


def transcript_view(t: Transcript, svc: Services) -> dict[str, Any]:
    """A transcript's row as API JSON (never its text)."""
    cutoff = retention_of(svc).rule_for(t.namespace)
    return {"id": str(t.id), "namespace": t.namespace, "owner": t.owner,
            "metadata": t.metadata, "raw_bytes": t.raw_bytes, "raw_chars": t.raw_chars,
            "stored_bytes": t.stored_bytes, "created_at": t.created_at.isoformat(),
            "state": state_of(archived_at=t.archived_at, pruned_at=t.pruned_at),
            "archived_at": t.archived_at.isoformat() if t.archived_at else None,
            "pruned_at": t.pruned_at.isoformat() if t.pruned_at else None,
            "retention_days": cutoff.retention_days if cutoff is not None else None}


def _encoded(text: str, max_bytes: int) -> bytes:
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate (reachable past the JSON reader)
        raise InvalidInputError("content holds a lone UTF-16 surrogate", field="content",
                                code="bad_encoding") from exc
    if len(raw) > max_bytes:
        raise TooLargeError(f"the transcript is {len(raw)} bytes; the limit is {max_bytes}",
                            field="content", limit=max_bytes, code="transcript_too_large")
    return raw


@dataclass
class StoreCall(Call[Transcript]):
    """``POST /v1/transcripts``."""

    spec = ops.TRANSCRIPT_STORE
    settles = True
    cmd: StoreTranscript
    owner: str = ""
    # The frame of the content as it stands (made for the quota step, reused by execute).
    framed: tuple[str, bytes] | None = None

    async def target(self, svc: Services, caller: Caller) -> Target:
        if self.cmd.content is None:  # an imported frame: inflate it once, within the bound
            frame = self.cmd.frame_bytes()
            assert frame is not None
            text = await asyncio.to_thread(framing.inflate_text, frame,
                                           max_bytes=retention_of(svc).max_bytes)
            # validated as text sent as content would be (NUL is refused there, and a hook's
            # Modify re-validates it: it was a 201 without a hook, a hook_invalid_modify with)
            self.cmd = parse(StoreTranscript, {"namespace": self.cmd.namespace, "content": text,
                                               "metadata": self.cmd.metadata})
        assert self.cmd.content is not None
        _encoded(self.cmd.content, retention_of(svc).max_bytes)
        check_sizes(svc.limits, content=None, metadata=self.cmd.metadata)  # as for memories
        # What the store adds to the owner's quota: the frame at rest and the metadata (as
        # the memory store counts metadata). Called again after a hook's Modify.
        return Target((self.cmd.namespace,), caller.agent_id,
                      self._adds(await self._frame(svc), svc))

    def _adds(self, frame: bytes, svc: Services) -> int:
        """What storing ``frame`` with the request's metadata adds to the owner's bytes: the
        frame as it will rest (sealing adds its nonce and tag)."""
        sealing = sealing_overhead(svc)
        return len(frame) + sealing + len(json.dumps(self.cmd.metadata).encode())

    async def _frame(self, svc: Services) -> bytes:
        """The zstd frame of the current content (compressed once per distinct content)."""
        content = self.cmd.content
        assert content is not None
        if self.framed is None or self.framed[0] is not content:
            raw = _encoded(content, retention_of(svc).max_bytes)
            frame = (await asyncio.to_thread(framing.compress, content)
                     if len(raw) > _THREAD_BYTES else framing.compress(content))
            self.framed = (content, frame)
        return self.framed[1]

    def check(self, svc: Services, caller: Caller, target: Target) -> Decision:
        if retention_of(svc).rule_for(self.cmd.namespace) is not None:
            return ALLOW
        return Decision("deny", "transcripts",
                        f"transcripts are not enabled in namespace {self.cmd.namespace!r}: the "
                        "MemoryCortex's spec.transcripts (enabled, namespaces) opens them",
                        "transcripts_disabled")

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return payload(event, namespace=self.cmd.namespace, content=self.cmd.content,
                       metadata=self.cmd.metadata, owner=self.owner)

    def modified(self, event: EventName, changed: dict[str, Any]) -> None:
        fields = {k: changed.get(k, getattr(self.cmd, k))
                  for k in ("namespace", "content", "metadata")}
        self.cmd = revalidate(StoreTranscript, fields)

    async def execute(self, svc: Services, caller: Caller) -> Transcript:
        assert self.cmd.content is not None
        raw = _encoded(self.cmd.content, retention_of(svc).max_bytes)
        frame = await self._frame(svc)
        transcript_id = settling.chosen_id(self.settlement) or uuid.uuid4()
        version, at_rest = seal(svc, transcript_id, frame)
        async with svc.db.transaction() as conn:
            await settling.spend(conn, self.settlement)
            stored = await rows.insert(
                conn, transcript_id=transcript_id, namespace=self.cmd.namespace,
                owner=caller.agent_id, metadata=self.cmd.metadata, frame=at_rest,
                raw_bytes=len(raw), raw_chars=len(self.cmd.content), key_version=version,
                by=write_records.written_by(caller))
            await settling.check_cap(conn, self.settlement, adds=self._adds(frame, svc))
            # The record covers the row the database returned (its normalised metadata).
            await write_records.record_transcript(svc, conn, caller, "transcript.stored",
                                                  stored, self.cmd.content)
        return stored.transcript

    def post_payload(self, event: EventName, result: Transcript) -> dict[str, Any]:
        return payload(event, id=str(result.id), namespace=result.namespace,
                       content=self.cmd.content, metadata=result.metadata, owner=result.owner,
                       raw_bytes=result.raw_bytes, stored_bytes=result.stored_bytes,
                       created_at=result.created_at.isoformat())


@dataclass
class ReplayCall(Call[dict[str, Any]]):
    """``GET /v1/memories/{id}/replay``."""

    spec = ops.MEMORY_REPLAY
    cmd: ReplayMemory
    memory: Memory | None = None
    cited: tuple[Citation, ...] = ()

    async def target(self, svc: Services, caller: Caller) -> Target:
        async with svc.db.connection() as conn:
            self.memory = await memory_rows.get(conn, self.cmd.memory_id)
            self.cited = tuple(await rows.citations(conn, self.cmd.memory_id))
        namespaces = dict.fromkeys([self.memory.namespace,
                                    *(c.transcript.namespace for c in self.cited)])
        return Target(tuple(namespaces), self.memory.author)

    async def execute(self, svc: Services, caller: Caller) -> dict[str, Any]:
        memory = self.memory
        assert memory is not None
        if memory.deleted:
            raise NotFoundError(f"memory {memory.id} is deleted; its citations went with it",
                                id=str(memory.id), code="memory_deleted")
        distinct = {c.transcript.id: c.transcript for c in self.cited}
        cited, budget = _cited_bytes(distinct.values()), replay_budget(svc)
        if cited > budget:  # cited before the bound held at store time
            raise TooLargeError(f"memory {memory.id} cites {cited} bytes of transcripts; one "
                                f"replay inflates at most {budget}",
                                code="replay_too_large", limit=budget)
        distinct, texts = await _current(svc, distinct)
        cited_now = [replace(c, transcript=distinct.get(c.transcript.id, c.transcript))
                     for c in self.cited]
        answer: dict[str, Any] = {
            "memory_id": str(memory.id), "namespace": memory.namespace, "full": self.cmd.full,
            "citations": [_citation_view(c, texts) for c in cited_now],
        }
        answer["transcripts"] = [
            {**transcript_view(t, svc), "readable": texts.get(t.id) is not None,
             **({"content": texts.get(t.id)} if self.cmd.full else {})}
            for t in distinct.values()]
        return answer


Current = tuple[dict[uuid.UUID, Transcript], dict[uuid.UUID, str]]


async def _current(svc: Services, cited: dict[uuid.UUID, Transcript]) -> Current:
    """Each cited transcript as it is now, and the text of every one that still has a
    readable frame: state and frame come from one statement, so a transcript pruned since
    the citations were read says ``pruned``, never ``unreadable``. Each frame is inflated
    within the size recorded when it was stored: one altered since (a bomb) stops at that
    bound and reads as unreadable instead of exhausting memory."""
    if not cited:
        return {}, {}
    async with svc.db.connection() as conn:
        rows_now = await rows.with_frames(conn, list(cited))
    now = {tid: rows_now[tid][0] if tid in rows_now else t for tid, t in cited.items()}
    frames = {tid: frame for tid, (_, frame) in rows_now.items() if frame is not None}
    if sum(now[tid].raw_bytes for tid in frames) > _THREAD_BYTES:
        return now, await asyncio.to_thread(_inflate_all, svc.sealer, frames, now)
    return now, _inflate_all(svc.sealer, frames, now)


def sealing_overhead(svc: Services) -> int:
    """The bytes sealing adds to a frame at rest (0 with ``encryption.at_rest`` off)."""
    return sealing.OVERHEAD if svc.sealer is not None and svc.sealer.seals else 0


def seal(svc: Services, transcript_id: uuid.UUID, frame: bytes) -> tuple[int | None, bytes]:
    """(key version, frame at rest): sealed under the ``transcripts`` subkey and bound to
    the row's id with ``encryption.at_rest`` on (ADR 0056), the frame itself otherwise."""
    if svc.sealer is None or not svc.sealer.seals:
        return None, frame
    return svc.sealer.seal("transcripts", transcript_id, frame)


def _opened(sealer: Sealer | None, t: Transcript, at_rest: bytes) -> bytes | None:
    """The zstd frame of a row's stored frame; None when it is sealed and does not open
    (altered, moved, or under a version this server's ring lacks): it reads ``unreadable``.
    A sealed row stays readable with encryption turned off while the key is configured."""
    if t.key_version is None:
        return at_rest
    if sealer is None:
        return None
    try:
        return sealer.open("transcripts", t.id, t.key_version, at_rest)
    except sealing.UnsealError:
        return None


def _inflate_all(sealer: Sealer | None, frames: dict[uuid.UUID, bytes],
                 cited: dict[uuid.UUID, Transcript]) -> dict[uuid.UUID, str]:
    texts: dict[uuid.UUID, str] = {}
    for tid, at_rest in frames.items():
        expected = cited[tid]
        frame = _opened(sealer, expected, at_rest)
        if frame is None:
            continue
        try:
            text = framing.inflate_text(frame, max_bytes=expected.raw_bytes)
        except (TooLargeError, InvalidInputError):
            continue
        if len(text) == expected.raw_chars:
            texts[tid] = text
    return texts


def _citation_view(c: Citation, texts: dict[uuid.UUID, str]) -> dict[str, Any]:
    t = c.transcript
    state = state_of(archived_at=t.archived_at, pruned_at=t.pruned_at)
    text = texts.get(t.id)
    view: dict[str, Any] = {"transcript_id": str(t.id), "start": c.start, "end": c.end,
                            "state": state if state == "pruned" or text is not None
                            else "unreadable"}
    if state == "pruned":
        view["text"] = None
        when = t.pruned_at.isoformat() if t.pruned_at else "an unknown time"
        view["note"] = (f"transcript {t.id} was pruned at {when} after its retention; the "
                        "cited text no longer exists")
    elif text is None:
        view["text"] = None
        view["note"] = f"transcript {t.id} no longer inflates to what was stored"
    else:
        view["text"] = spans.cut(text, spans.Span(t.id, c.start, c.end))
    return view


async def check_citations(svc: Services, caller: Caller, conn: Conn,
                          citations: list[Cite]) -> list[spans.Span]:
    """Check the spans a new memory cites, in its write's transaction and before the write
    (which takes the chain lock: the sweeper locks transcript rows, then the chain, so a
    store must lock them in that order too): each transcript exists, is the caller's, is
    readable by the caller and not archived (locked FOR SHARE until the store commits), and
    the spans fall inside it without overlapping."""
    if not citations:
        return []
    wanted = [spans.Span(c.transcript_id, c.start, c.end) for c in citations]
    found = await rows.get_many(conn, [s.transcript_id for s in wanted], for_share=True)
    for index, span in enumerate(wanted):
        field = f"citations[{index}]"
        t = found.get(span.transcript_id)
        if t is None or t.owner != caller.agent_id:
            raise InvalidInputError(f"{field}: no transcript {span.transcript_id} of yours",
                                    field=field, code="unknown_transcript")
        if not caller.scopes.allows("memory.read", t.namespace):
            raise DeniedError(f"agent {caller.agent_id} lacks scope memory.read in namespace "
                              f"{t.namespace!r} of the cited transcript", code="scope_denied",
                              decision="deny", scope="memory.read", namespace=t.namespace,
                              source="scope", reason="scope memory.read not held")
        if t.archived_at is not None:
            raise InvalidInputError(f"{field}: transcript {t.id} is archived (past its "
                                    "retention) and can no longer be cited", field=field,
                                    code="transcript_archived")
    spans.check_spans(wanted, {tid: t.raw_chars for tid, t in found.items()})
    cited, budget = _cited_bytes(found.values()), replay_budget(svc)
    if cited > budget:
        raise TooLargeError(f"the cited transcripts hold {cited} bytes together; a memory may "
                            f"cite at most {budget} (a replay inflates them whole)",
                            field="citations", code="citations_too_large", limit=budget)
    return wanted


async def cite(conn: Conn, memory_id: uuid.UUID, checked: list[spans.Span]) -> None:
    """Record the spans :func:`check_citations` accepted, once the memory is written."""
    await rows.cite(conn, memory_id, [(s.transcript_id, s.start, s.end) for s in checked])


async def store_transcript(svc: Services, caller: Caller, cmd: StoreTranscript) -> Transcript:
    """Store a transcript (zstd level 3 at rest); the MCP tool ``transcript_store`` wraps
    this."""
    return await run(svc, caller, StoreCall(cmd, caller.agent_id))


async def replay(svc: Services, caller: Caller, cmd: ReplayMemory) -> dict[str, Any]:
    """The spans a memory cites (``full``: the whole transcripts); the MCP tool
    ``memory_replay`` wraps this."""
    return await run(svc, caller, ReplayCall(cmd))


async def _written(svc: Services, transcript_id: uuid.UUID) -> Transcript:
    async with svc.db.connection() as conn:
        found = await rows.get_many(conn, [transcript_id])
    if transcript_id not in found:
        raise NotFoundError(f"transcript {transcript_id} does not exist",
                            id=str(transcript_id))
    return found[transcript_id]


#: The answer of a keyed transcript store (ADR 0030): its row (sizes, state, retention).
TRANSCRIPT = AnswerKind[Transcript]("transcript", lambda svc, t: transcript_view(t, svc),
                                    _written)
