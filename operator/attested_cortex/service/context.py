"""The values every operation pipeline runs with: who calls, and the frozen set of services.

``Services`` is assembled once at server start-up (see :mod:`attested_cortex.server.app`)
and never mutated; hot-reloadable parts (the hook configuration) manage their own state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from attested_cortex.attest.loading import KeySource
from attested_cortex.hooks.events import EventName
from attested_cortex.policy.decisions import Verdict
from attested_cortex.policy.quotas import Buckets
from attested_cortex.policy.rules import RuleSet
from attested_cortex.policy.scopes import DEFAULT, ScopeSet
from attested_cortex.service.limits import Limits
from attested_cortex.store.database import Database
from attested_cortex.store.idempotency import Claim
from attested_cortex.types import AgentId

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
    """Rules, the no-rule default for writes, and quotas (see :mod:`.pipeline`)."""

    rules: RuleSet = field(default_factory=RuleSet)
    write_default: Verdict = "allow"
    buckets: Buckets | None = None
    storage_per_agent_bytes: int = 100 * 1024 * 1024
    storage_overrides: Mapping[str, int] = field(default_factory=dict)

    def storage_limit(self, agent_id: str) -> int:
        """The agent's stored-bytes cap."""
        return self.storage_overrides.get(agent_id, self.storage_per_agent_bytes)


#: Called at each pipeline step with (operation name, step name); tests trace with it.
StepObserver = Callable[[str, str], None]


@dataclass(frozen=True)
class Services:
    """Everything an operation needs, frozen at start-up."""

    db: Database
    limits: Limits = field(default_factory=Limits)
    graph: Any = None  # attested_cortex.store.graph.base.GraphBackend once wired
    hooks: HookFirer | None = None
    permission_mode: PermissionMode = "advisory"
    auth_mode: str = "dev"
    metrics_registry: Any = None  # prometheus_client.CollectorRegistry shared by all parts
    keys: KeySource | None = None  # mounted agent keys and keyring, reloaded on change
    vectors: Any = None  # attested_cortex.service.embedding.Vectors: hybrid recall state
    extras: Mapping[str, Any] = field(default_factory=dict)
    policy: Policy = field(default_factory=Policy)
    approvals: Any = None  # service.approving.Approvals when the approval API is configured
    transcripts: Any = None  # service.transcript_sweeping.Transcripts: policy and sweeper
    observe: StepObserver | None = None
