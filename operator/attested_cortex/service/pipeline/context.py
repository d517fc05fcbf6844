"""The values every operation pipeline runs with: who calls, and the frozen set of services.

``Services`` is assembled once at start-up by
:func:`attested_cortex.server.assembling.open_services` (for ``cortexctl serve``,
``cortexctl doctor``, the benches and the tests) and never mutated;
the parts with live state of their own (the hook configuration, the approval queue, the
vector backfill, the transcript sweeper) manage it inside themselves. The worker types are
imported for the type checker only: the workers sit above the pipeline (ADR 0025), and only
their values travel down through this record (ADR 0026).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from attested_cortex.attest.loading import KeySource
from attested_cortex.attest.masterkeys import KeyRing
from attested_cortex.attest.ringwatch import RingSource
from attested_cortex.attest.sealing import Sealer
from attested_cortex.hooks.events import EventName
from attested_cortex.policy.decisions import Verdict
from attested_cortex.policy.quotas import Buckets
from attested_cortex.policy.rules import RuleSet
from attested_cortex.policy.scopes import DEFAULT, ScopeSet
from attested_cortex.policy.tiers import Ceiling, TrustTier, ceilings
from attested_cortex.service.pipeline.limits import Limits
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.store.database import Conn, Database
from attested_cortex.store.idempotency import Claim
from attested_cortex.types import AgentId

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from attested_cortex.service.workers.approving import Approvals
    from attested_cortex.service.workers.checkpointing import Checkpointer
    from attested_cortex.service.workers.delivering import Delivery
    from attested_cortex.service.workers.embedding import Vectors
    from attested_cortex.service.workers.pending_receipts import PendingReceipts
    from attested_cortex.service.workers.read_recording import ReadRecorder
    from attested_cortex.service.workers.resealing import Resealer
    from attested_cortex.service.workers.transcript_sweeping import Transcripts
    from attested_cortex.service.workers.transfer_expiry import TransferExpiry
    from attested_cortex.store.graph.base import GraphBackend

PermissionMode = Literal["advisory", "enforce", "off"]
HookDecisionKind = Literal["allow", "deny", "ask_user"]


@dataclass(frozen=True)
class Caller:
    """The authenticated agent behind a request."""

    agent_id: AgentId
    auth: str
    scopes: ScopeSet = DEFAULT
    approval: str | None = None  # X-Cortex-Approval: completing an approved request
    #: The request already took its rate-quota token (the HTTP layer takes it right after
    #: authentication, before the body is read): the pipeline does not take another.
    rated: bool = False
    #: The request's Idempotency-Key (ADR 0030; :mod:`.idempotency`), and the claim a first
    #: write with it takes in its transaction.
    idempotency_key: str | None = None
    claim: Claim | None = None
    #: The credential's trust tier (ADR 0049); Kernel is the server's own work, refused
    #: from a caller. With a ``ceiling``, ``scopes`` are the effective scopes (held ∩
    #: ceiling, computed once when the request is authenticated) and ``held`` what the
    #: credential holds, so a refusal can name the ceiling that removed a scope.
    tier: TrustTier = "Kernel"
    held: ScopeSet | None = None
    ceiling: Ceiling | None = None
    #: The request's Allow summary (``allow:rule:<source>``..., ``allow:default``), set by
    #: the pipeline once its rules and gate decided, just before the operation runs, so a
    #: write keeps it in its row and record (ADR 0124). None outside the pipeline.
    allowed: tuple[str, ...] | None = None


class ChainOutcome(Protocol):
    """What a hook chain answered (see :mod:`attested_cortex.hooks`)."""

    @property
    def decision(self) -> HookDecisionKind: ...
    @property
    def payload(self) -> Mapping[str, Any]: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def code(self) -> str | None: ...
    @property
    def prompt(self) -> str | None: ...
    @property
    def modified(self) -> bool: ...
    @property
    def reorder_note(self) -> str | None: ...


class HookFirer(Protocol):
    """The one call the service makes into the hook pipeline."""

    async def fire(
        self, event: EventName, payload: Mapping[str, Any], *, agent_id: str,
        namespace: str | None,
    ) -> ChainOutcome: ...

    def wants(self, event: EventName) -> bool:
        """Whether any hook is configured for ``event`` (else its payload is not built)."""
        ...

    def describe(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class Policy:
    """Rules, the no-rule default for writes, quotas and trust ceilings (see :mod:`.running`)."""

    rules: RuleSet = field(default_factory=RuleSet)
    write_default: Verdict = "allow"
    buckets: Buckets | None = None
    storage_per_agent_bytes: int = 100 * 1024 * 1024
    storage_overrides: Mapping[str, int] = field(default_factory=dict)
    #: Trust tier -> ceiling (:mod:`attested_cortex.policy.tiers`).
    ceilings: Mapping[str, Ceiling] = field(default_factory=ceilings)

    def storage_limit(self, agent_id: str) -> int:
        """The agent's stored-bytes cap."""
        return self.storage_overrides.get(agent_id, self.storage_per_agent_bytes)


#: Called at each pipeline step with (operation name, step name); tests trace with it.
StepObserver = Callable[[str, str], None]
#: Writes one policy record to the audit chain: (caller, operation, record).
#: Where an audit record goes: the acting caller, the operation (None: a refusal made
#: before any operation ran) and the record.
AuditSink = Callable[[Caller, OperationSpec | None, dict[str, Any]], Awaitable[None]]
#: Describes a mounted endpoint for ``/v1/capabilities`` (the MCP endpoint's ``describe``).
Describer = Callable[[], dict[str, Any]]


class NativeRecords(Protocol):
    """What the spoke-memory family says about native reads and writes of its records
    (ADR 0083, ADR 0084). Given at assembly (ADR 0125) so the core memory, recall and graph
    operations ask it without importing the family, which depends on them."""

    async def hidden(self, conn: Conn, caller: Caller,
                     namespaces: Mapping[uuid.UUID, str]) -> set[uuid.UUID]:
        """Of the memories ``namespaces`` names, the records ``caller`` may not read natively."""
        ...

    def hides(self, caller: Caller, memory_id: uuid.UUID, namespace: str,
              records: frozenset[uuid.UUID]) -> bool:
        """:meth:`hidden` for one memory of a read that already knows its ``records``."""
        ...

    async def native_write(self, conn: Conn, memory_id: uuid.UUID) -> None:
        """Raise as the family's own writes would when ``memory_id`` is a record that is
        frozen or fenced; nothing for any other memory."""
        ...


@dataclass(frozen=True)
class Services:
    """Everything an operation needs, frozen at start-up; ``None`` is a part not configured.

    Only ``db`` is required, so a test or a bench can build the part it exercises.
    """

    db: Database
    limits: Limits = field(default_factory=Limits)
    graph: GraphBackend | None = None  # the live knowledge-graph backend (AGE or CTE)
    hooks: HookFirer | None = None
    permission_mode: PermissionMode = "advisory"
    auth_mode: str = "dev"
    metrics_registry: CollectorRegistry | None = None  # shared by every part that counts
    keys: KeySource | None = None  # mounted agent keys and keyring, reloaded on change
    #: The master key ring in use (ADR 0050), reloaded when its Secret changes (ADR 0066);
    #: None: no key hierarchy.
    master_keys: RingSource | None = None
    #: Seals rows at rest under the ring when ``encryption.at_rest`` is on and opens sealed
    #: rows (ADR 0056); None: no master key.
    sealer: Sealer | None = None
    #: Where ``encryption.at_rest`` came from: ``settings``, or ``cortex default`` (unset:
    #: decided at the cortex's first start and kept in its database, ADR 0079).
    at_rest_from: str = "settings"
    #: Re-seals transcript frames under the current key version (rotation); None: no key.
    resealer: Resealer | None = None
    vectors: Vectors | None = None  # hybrid recall state: embedder, write-behind, backfill
    policy: Policy = field(default_factory=Policy)
    approvals: Approvals | None = None  # the approval API, when configured
    transcripts: Transcripts | None = None  # transcript retention and its sweeper
    #: The spoke-memory family's pending receipts and the OpenAI-compatible reflection
    #: engine they run (ADR 0069); None: reflections use the extractive default, at once.
    pending: PendingReceipts | None = None
    #: Expires staged imports and exports (issue 37 item 16); None: not started here.
    transfer_expiry: TransferExpiry | None = None
    #: Where the pipeline's policy records go on the signed chain (``audit_signer`` set).
    audit_sink: AuditSink | None = None
    #: Where a read's ``memory.access`` statement goes (``audit.record_reads`` with an
    #: audit signer); None: reads are not recorded.
    access_sink: AuditSink | None = None
    #: Appends the queued read records behind the answers (ADR 0099, decision 6).
    read_recorder: ReadRecorder | None = None
    #: Signs checkpoints of the audit tree (``audit_signer`` set; issue 40, ADR 0099).
    checkpointer: Checkpointer | None = None
    #: The mounted MCP endpoint's self-description; ``None`` when this process serves none.
    mcp: Describer | None = None
    observe: StepObserver | None = None
    #: Whether writes append their ``post_*`` events to the outbox (migration 0038 applied;
    #: ADR 0106); the subscription deliverer reads it.
    outbox: bool = False
    #: Webhook delivery (ADR 0106), in this loop or a child process (ADR 0142); None: off.
    deliverer: Delivery | None = None
    #: The spoke-memory family's gate on native reads and writes of its records (ADR 0125);
    #: None: no family assembled, so no memory is one of its records.
    records: NativeRecords | None = None

    @property
    def key_ring(self) -> KeyRing | None:
        """The master key's versions and their subkeys as they are now."""
        return None if self.master_keys is None else self.master_keys.ring
