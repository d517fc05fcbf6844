"""The one Decision every policy surface produces, and how decisions merge.

Rules (:mod:`.rules`), ownership and hook chains each answer Allow, AskUser or Deny (a
hook's Modify is an Allow with a changed payload). :func:`strictest` merges them: Deny beats
AskUser beats Allow, and the first of equal strictness keeps its reason. The permission mode
(advisory, enforce, off) is applied once, where the service interprets the merged decision.
Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Verdict = Literal["allow", "ask_user", "deny"]
Mode = Literal["advisory", "enforce", "off"]

_RANK: Final[dict[Verdict, int]] = {"allow": 0, "ask_user": 1, "deny": 2}


@dataclass(frozen=True)
class Decision:
    """A verdict with who made it (``rule:<source>``, ``hook:<name>``, ``ownership``,
    ``default``) and why."""

    verdict: Verdict
    source: str
    reason: str | None = None
    code: str = "denied"
    hook_code: str | None = None  # the ``code`` a denying hook gave

    @property
    def allows(self) -> bool:
        """Whether the verdict is Allow."""
        return self.verdict == "allow"


ALLOW: Final = Decision("allow", "default")


def strictest(*decisions: Decision) -> Decision:
    """Deny > AskUser > Allow; the earliest of the strictest kind wins (an Allow too: the
    rule that allowed is what a read's audit record names, issue 40); none: the default."""
    best: Decision | None = None
    for decision in decisions:
        if best is None or _RANK[decision.verdict] > _RANK[best.verdict]:
            best = decision
    return ALLOW if best is None else best
