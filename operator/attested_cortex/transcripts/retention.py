"""Where transcripts are accepted and how long they are kept: pure decisions over the
configured policy (``spec.transcripts`` of the MemoryCortex, rendered into the server's
``transcripts`` settings).

Transcripts are off unless enabled; once enabled, ``namespaces`` (memory-namespace patterns,
first match wins) says where, each with its own retention, or every namespace with the
cortex-wide retention when the list is empty. A transcript older than its namespace's
retention is archived (still replayable, no longer citable); ``prune_after_days`` after
archiving its bytes are pruned (the row stays so citations say so). Called by the service
(store, capabilities) and the sweeper (:mod:`attested_cortex.service.resources.transcripts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

State = Literal["stored", "archived", "pruned"]


@dataclass(frozen=True)
class Rule:
    """Transcripts are accepted in namespaces matching ``pattern``, kept ``retention_days``
    (None: forever). ``admits`` is the compiled pattern (the policy layer's matcher, handed
    in by the service: this layer stands apart from the policy layer)."""

    pattern: str
    retention_days: int | None
    admits: Callable[[str], bool] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Retention:
    """The whole transcript policy of one server."""

    enabled: bool = False
    rules: tuple[Rule, ...] = ()
    #: The cortex-wide retention: also what transcripts of a namespace no rule accepts any
    #: more (the spec changed after they were stored) are kept.
    default_retention_days: int | None = None
    prune_after_days: int = 7
    max_bytes: int = 1024 * 1024
    sweep_interval_s: float = 60.0
    sweep_batch: int = 500

    def rule_for(self, namespace: str) -> Rule | None:
        """The rule that accepts transcripts in ``namespace``, or None where they are off."""
        if not self.enabled:
            return None
        return next((rule for rule in self.rules if rule.admits(namespace)), None)

    def archive_before(self, namespace: str, now: datetime) -> datetime | None:
        """Transcripts of ``namespace`` created before this are due for archiving (None:
        kept forever)."""
        rule = self.rule_for(namespace)
        days = rule.retention_days if rule is not None else self.default_retention_days
        return None if days is None else now - timedelta(days=days)

    def prune_before(self, now: datetime) -> datetime:
        """Archived transcripts archived before this are due for pruning."""
        return now - timedelta(days=self.prune_after_days)

    def describe(self) -> list[dict[str, object]]:
        """Where transcripts are on and the retention in force, for capabilities."""
        if not self.enabled:
            return []
        return [{"namespace": r.pattern, "retention_days": r.retention_days}
                for r in self.rules]


def state_of(*, archived_at: datetime | None, pruned_at: datetime | None) -> State:
    """Where a transcript is in its lifecycle."""
    if pruned_at is not None:
        return "pruned"
    return "archived" if archived_at is not None else "stored"
