"""The values of the operation pipeline: the steps, a request's target and outcome, and
:class:`Call`, the base of every operation. Pure data; :mod:`.running` runs them,
:mod:`.deciding` and :mod:`.hook_steps` implement the steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Generic, Literal, TypeVar, get_args

from attested_cortex.errors import CortexError
from attested_cortex.hooks.events import EventName
from attested_cortex.policy.decisions import ALLOW, Decision
from attested_cortex.service.pipeline.context import Caller, ChainOutcome, Services
from attested_cortex.service.pipeline.operations import OperationSpec
from attested_cortex.service.pipeline.settling import NOTHING, Settlement

R = TypeVar("R")

Step = Literal[
    "authenticate", "scope", "rules", "pre_hooks", "quota", "operation", "post_hooks", "audit"
]
STEPS: Final[tuple[Step, ...]] = get_args(Step)


@dataclass(frozen=True)
class Target:
    """What an operation touches, found before it runs.

    ``namespaces``: the memory namespaces it reads or writes (a link: both ends; a listing
    or recall: the requested namespace, or none). ``owner``: the author or observer of the
    object it changes. ``adds_bytes``: what a write adds to its author's stored bytes.
    """

    namespaces: tuple[str, ...] = ()
    owner: str | None = None
    adds_bytes: int = 0


@dataclass
class Outcome:
    """What the pipeline decided, for the audit step."""

    decisions: list[Decision] = field(default_factory=list)
    advisory: list[Decision] = field(default_factory=list)
    error: CortexError | None = None
    post_denied: Decision | None = None
    ask: Decision | None = None  # an AskUser to settle at the approval gate (enforce)
    approved: Any = None  # the approval (checked, not yet spent) this request completes
    consumed: Any = None  # the approval spent before a call that does not settle its own
    modified: bool = False  # a pre- hook changed the request
    #: The Allow decisions (rule and invariant), summarized in a read's record and a
    #: write's (:meth:`summary`).
    allowed: list[Decision] = field(default_factory=list)
    #: What a successful read answered and whom it asked, for its ``memory.access`` record.
    target: Target | None = None
    result: Any = None

    def summary(self) -> tuple[str, ...]:
        """The request's decisions as ``verdict:source`` (``allow:rule:<source>``...,
        sorted, at most 16), the default Allow only when nothing else decided (ADR 0105,
        0124): what a read's ``decisions`` and a write's ``allowed`` record."""
        decided = sorted({f"{d.verdict}:{d.source}" for d in (*self.allowed,
                                                              *self.decisions)})
        if len(decided) > 1:  # the default Allow says nothing beside a rule that decided
            decided = [d for d in decided if d != "allow:default"]
        return tuple(decided[:16])


class Call(Generic[R]):
    """One operation request. Subclasses set ``spec`` and override what they use."""

    spec: ClassVar[OperationSpec]
    #: Whether ``execute`` spends the approval and checks the cap in its own transaction
    #: (:mod:`.settling`); else the pipeline spends the approval before it runs.
    settles: ClassVar[bool] = False
    #: What ``execute`` settles, set by the pipeline before it runs.
    settlement: Settlement = NOTHING
    #: Whether the call is a batch of items, each firing its own hook events (a hook's
    #: refusal then names the item's ``index``).
    batched: ClassVar[bool] = False

    async def target(self, svc: Services, caller: Caller) -> Target:
        """The namespaces and owner the operation touches (may read the database)."""
        return Target()

    def hooked(self, target: Target) -> Sequence[tuple[Call[Any], str | None]]:
        """The calls the hook steps fire events for, each with the namespace it fires in:
        this call, in its target's one namespace; a batch answers each of its items."""
        return ((self, target.namespaces[0] if len(target.namespaces) == 1 else None),)

    def hooked_results(self, result: R) -> Sequence[Any]:
        """The result each of :meth:`hooked`'s calls carries into its post- events."""
        return (result,)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        """The payload of a pre- event, built from the request as it is now."""
        raise NotImplementedError(event)

    def modified(self, event: EventName, payload: dict[str, Any]) -> None:
        """Take a pre- hook's (possibly modified) payload back into the request."""

    def check(self, svc: Services, caller: Caller, target: Target) -> Decision:
        """Operation-specific invariants of the rules step (e.g. retroactive invalidation)."""
        return ALLOW

    async def execute(self, svc: Services, caller: Caller) -> R:
        """The operation itself."""
        raise NotImplementedError

    def post_payload(self, event: EventName, result: R) -> dict[str, Any]:
        """The payload of a post- event."""
        raise NotImplementedError(event)

    def post_answer(self, event: EventName, result: R, answer: ChainOutcome) -> R:
        """The result after a post- chain: unchanged, but a recall's hooks may reorder and
        drop its hits (docs/adr/0071; their answer was screened by the hook layer)."""
        return result

    def request(self) -> dict[str, Any]:
        """The request as JSON: what a held action shows and what its approval is bound to."""
        cmd = getattr(self, "cmd", None)
        found: dict[str, Any] = cmd.model_dump(mode="json") if cmd is not None else {}
        for name in ("memory_id", "link_id", "namespace", "limit"):
            if hasattr(self, name):
                found[name] = str(getattr(self, name))
        return found
