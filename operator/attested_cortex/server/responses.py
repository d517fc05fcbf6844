"""Response shapes of the API, as pydantic models: the OpenAPI document is generated from
them and from the request models in :mod:`attested_cortex.service.resources.commands`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# declared below the server, where the spoke-memory answers can carry them too
from attested_cortex.attest.receipt_models import ReceiptOut as ReceiptOut
from attested_cortex.attest.receipt_models import ReceiptsOut as ReceiptsOut


class ErrorBody(BaseModel):
    """The error: a stable code, a message saying what to do, structured details."""

    code: str
    message: str
    details: dict[str, Any]


class ErrorOut(BaseModel):
    """Every error response."""

    error: ErrorBody


class MemoryOut(BaseModel):
    """A stored memory (a tombstone has ``deleted: true`` and no content)."""

    id: str = Field(description="UUID")
    namespace: str
    title: str
    content: str
    tags: list[str]
    metadata: dict[str, Any]
    author: str = Field(description="Agent id that stored the memory")
    revision: int
    created_at: str
    updated_at: str
    deleted: bool
    deleted_at: str | None
    unreadable: bool | None = Field(
        None, description="Present (true) when the memory rests sealed and does not open "
        "under this cortex's master key ring (a restore without the source's key, a version "
        "removed from the ring, or bytes altered behind the server): title, content and "
        "metadata then read empty. Absent otherwise")


class MemoryReadOut(MemoryOut):
    """A memory read by id; with `?receipts=true`, its receipt."""

    receipts: ReceiptsOut | None = None


class MemoryListOut(BaseModel):
    """One page of the live memories of a namespace subtree, newest first by creation."""

    memories: list[MemoryOut]
    truncated: bool = Field(False, description="Whether the limit or the answer's byte bound "
                            "(limits.max_answer_bytes) cut the page")
    next: str | None = Field(None, description="The cursor of the next page (`?cursor=`); "
                             "null at the end")
    receipts: ReceiptsOut | None = None


class MemoryBatchOut(BaseModel):
    """The memories a batch stored, in the order they were sent."""

    memories: list[MemoryOut]


class HitOut(MemoryOut):
    """A recalled memory with its score."""

    score: float
    embedded: bool | None = Field(
        None, description="Hybrid mode: whether the memory has a current vector (else it "
        "was found by its words only, and the write-behind embedder or the backfill will "
        "embed it)")
    explain: dict[str, Any] | None = Field(
        None, description="With `explain: true`: full-text and vector rank and score, "
        "relevance (RRF), recency, proximity")


class RecallOut(BaseModel):
    """Recall results, best first."""

    results: list[HitOut]
    truncated: bool = Field(description="Whether the token budget or the answer's byte "
                            "bound dropped any result")
    omitted_ids: list[str] = Field(default_factory=list, description="Ranked results past "
                                   "the answer's byte bound, by id, in rank order")
    tokens: int = Field(description="Estimated tokens of the returned results")
    mode: str = Field("fulltext", description="`hybrid` (words and meaning) or `fulltext`")
    degraded: str | None = Field(
        None, description="Why this query fell back to full-text in hybrid mode")
    receipts: ReceiptsOut | None = None


class HealthOut(BaseModel):
    """Liveness / readiness."""

    status: str
    checks: dict[str, Any] = Field(default_factory=dict)


class CapabilitiesOut(BaseModel):
    """The live self-description of this server: every field read at request time."""

    model_config = {"extra": "allow"}

    schema_version: int
    max_supported_schema: int
    kg_backend: str | None
    auth: dict[str, Any]
    permissions: dict[str, Any]
    hooks: dict[str, Any]
    transcripts: dict[str, Any]
    attestation: dict[str, Any]
    quotas: dict[str, Any]
    limits: dict[str, int]


class LinkOut(BaseModel):
    """A link between two memories."""

    id: str
    src_id: str
    dst_id: str
    relation: str
    valid_from: str
    valid_until: str | None
    observed_by: str
    attest_level: str = Field(description="unsigned, self_signed or peer_attested")
    signed_by: str | None
    signature: str | None = Field(description="base64 Ed25519 signature")
    signed_at: str | None
    created_at: str


class LinkListOut(BaseModel):
    """One page of a memory's links, history included, oldest first by creation."""

    links: list[LinkOut]
    truncated: bool = Field(False, description="Whether the limit or the answer's byte bound "
                            "cut the page")
    next: str | None = Field(None, description="The cursor of the next page (`?cursor=`); "
                             "null at the end")


class NodeOut(BaseModel):
    """A reached memory and its distance in hops."""

    id: str
    depth: int


class EdgeOut(BaseModel):
    """A walked link."""

    id: str
    src_id: str
    dst_id: str
    relation: str


class SubgraphOut(BaseModel):
    """kg/query's answer (bounded; ``truncated`` when capped)."""

    nodes: list[NodeOut]
    edges: list[EdgeOut]
    truncated: bool


class PathOut(BaseModel):
    """One simple path."""

    hops: int
    links: list[str]
    nodes: list[str]


class PathsOut(BaseModel):
    """kg/paths' answer, shortest first."""

    paths: list[PathOut]
    truncated: bool


class TimelineOut(BaseModel):
    """A memory's links ordered by validity."""

    memory_id: str
    links: list[LinkOut]
    truncated: bool


class LinkVerifyOut(BaseModel):
    """A stored link's signature re-verified from its row."""

    link_id: str
    signature_verified: bool
    attest_level: str = Field(description="The level the verifying key supports (unsigned "
                              "when none verifies), not the row's claim")
    stored_attest_level: str = Field(description="The level the row claims")
    signed_by: str | None
    observed_by: str
    key_fingerprint: str | None = Field(description="The key that verified")
    signed_at: str | None
    reason: str | None = Field(description="Why it does not verify: unsigned, "
                               "no_trusted_key_verifies, signed_by_is_not_observed_by, "
                               "stored_level_differs")


class MemoryVerifyOut(BaseModel):
    """A memory's current revision: its agent signature re-verified from the row."""

    memory_id: str
    revision: int
    signature_verified: bool
    attest_level: str = Field(description="The level the verifying key supports")
    stored_attest_level: str
    signed_by: str | None
    key_fingerprint: str | None
    signed_at: str | None
    reason: str | None = Field(description="unsigned, no_trusted_key_verifies, "
                               "stored_level_differs")


class MismatchOut(BaseModel):
    """A row that no longer matches its write record (or a record without its row)."""

    kind: str = Field(description="memory, link, transcript, usage (id: the agent), or a "
                      "spoke-memory grant, receipt, space, subject or candidate "
                      "(ADR 0067)")
    id: str
    problem: str = Field(description="changed, downgraded, missing_event, missing_row, "
                         "unreadable, miscounted")
    fields: list[str]
    sequence: int | None = Field(description="The record event compared")


class DeepAuditOut(BaseModel):
    """Every memory, link and transcript row against its latest write record."""

    ok: bool
    memories: int
    links: int
    transcripts: int
    records: int
    agents: int = Field(description="Agents whose stored-bytes counter was recounted")
    spoke: dict[str, int] = Field(default_factory=dict, description=(
        "spoke-memory rows compared with their op records, by kind (ADR 0067)"))
    mismatch_count: int
    mismatches: list[MismatchOut]
    truncated: bool


class KeyedFaultOut(BaseModel):
    """One event of the keyed chain appended without the master key, or with a bad MAC."""

    sequence: int
    problem: str = Field(description="unkeyed_event, bad_mac or unknown_mac_key")


class KeyedChainOut(BaseModel):
    """The HMAC-keyed chain (ADR 0051): checked with the server's master key, else why not."""

    checked: bool
    ok: bool | None
    reason: str | None = Field(None, description="Why it was not checked (no master key)")
    key_versions: list[int] | None = None
    keyed_from: int | None = Field(None, description="The first event with a MAC")
    unkeyed_before: int | None = Field(None, description="Events before it (not faults)")
    macs_checked: int | None = None
    fault_count: int | None = None
    faults: list[KeyedFaultOut] | None = None
    truncated: bool | None = None


class AuditCheckpointOut(BaseModel):
    """The latest signed checkpoint of the audit tree (hashes in standard base64)."""

    origin: str
    size: int
    root_hash: str
    note: str = Field(description="The C2SP signed note, with the witnesses' cosignatures")
    cosignatures: int = Field(0, description="How many witnesses' cosignatures it carries")
    created_at: str
    log_key: str | None = Field(description="The log's verifier key (name+id+key)")


class AuditProofOut(BaseModel):
    """An event's inclusion proof."""

    seq: int
    leaf_index: int
    tree_size: int
    leaf_hash: str
    root_hash: str
    proof: list[str]
    checkpoint: str | None = Field(description="The signed note of this size, when one was cut")


class AuditConsistencyOut(BaseModel):
    """A consistency proof between two tree sizes (``from`` and ``to``)."""

    model_config = ConfigDict(populate_by_name=True)

    from_: int = Field(alias="from")
    to: int
    from_root: str
    to_root: str
    proof: list[str]


class AuditVerifyOut(BaseModel):
    """The whole signed_events chain verified."""

    ok: bool
    events: int
    first_bad_sequence: int | None
    reason: str | None
    head_hash: str | None
    signatures_checked: int
    unverified: int
    keyed: KeyedChainOut
    checkpoints_checked: int = Field(0, description="Signed checkpoints whose root the "
                                     "events were found to have")
    deep: DeepAuditOut | None = Field(None, description="With deep=true: the row sweep")


class ApprovalOut(BaseModel):
    """One held action."""

    id: str
    agent_id: str
    operation: str
    namespace: str | None
    request: dict[str, Any]
    reason: str | None
    source: str
    status: str
    remember: bool
    created_at: str
    expires_at: str
    decided_at: str | None
    decided_by: str | None
    consumed: bool


class ApprovalListOut(BaseModel):
    """One page of pending actions, oldest first."""

    approvals: list[ApprovalOut]
    next: str | None = Field(None, description="The cursor of the next page (null: the last)")


class TranscriptOut(BaseModel):
    """A stored transcript (its text is never echoed: replay reads it)."""

    id: str = Field(description="UUID")
    namespace: str
    owner: str = Field(description="Agent id that stored the transcript")
    metadata: dict[str, Any]
    raw_bytes: int = Field(description="UTF-8 bytes of the text")
    raw_chars: int = Field(description="Characters of the text (what span offsets count)")
    stored_bytes: int = Field(description="Bytes of the zstd frame at rest")
    created_at: str
    state: str = Field(description="stored, archived (past its retention) or pruned")
    archived_at: str | None
    pruned_at: str | None
    retention_days: int | None = Field(description="The namespace's retention now; null: forever")


class CitationOut(BaseModel):
    """One cited span and its text, or why the text is gone."""

    transcript_id: str
    start: int
    end: int
    state: str = Field(description="stored, archived, pruned or unreadable")
    text: str | None = Field(description="The cited characters; null when pruned or unreadable")
    note: str | None = Field(None, description="Why there is no text")


class ReplayTranscriptOut(TranscriptOut):
    """A cited transcript; ``content`` only with ``?full=true``."""

    readable: bool
    content: str | None = Field(None, description="The whole text (``full=true``)")


class ReplayOut(BaseModel):
    """What a memory came from."""

    memory_id: str
    namespace: str
    full: bool
    citations: list[CitationOut]
    transcripts: list[ReplayTranscriptOut]


class SubscriptionOut(BaseModel):
    """A webhook subscription and its delivery state (never its secret, but once)."""

    id: str
    name: str
    url: str
    events: list[str]
    namespaces: list[str]
    max_in_flight: int
    enabled: bool
    allow_private_targets: bool
    managed_by: str
    created_at: str
    updated_at: str
    status: dict[str, Any] = Field(description="lag, cursor, head, last_success_at, "
                                   "last_failure_at, last_error, dead_letters, "
                                   "behind_retention, running (this replica delivers it)")
    secret: str | None = Field(None, description="Only in the answer to a create that "
                               "generated it")


class SubscriptionListOut(BaseModel):
    """Every subscription, by name."""

    subscriptions: list[SubscriptionOut]


class DeadLetterOut(BaseModel):
    """An event that exhausted its retries."""

    sequence: int
    event: str
    key: str
    attempts: int
    last_error: str
    dead_at: str
    payload: dict[str, Any] | None = None


class DeadLetterListOut(BaseModel):
    """One page of dead letters, oldest first."""

    dead_letters: list[DeadLetterOut]
    next: int | None


class SubscriptionActionOut(BaseModel):
    """What a delete, replay, dead-letter replay or purge did."""

    model_config = ConfigDict(extra="allow")
