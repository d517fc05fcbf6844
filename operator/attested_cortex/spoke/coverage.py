"""What a principal may do in a space, from its live grants (ADR 0060 §4). Pure.

A principal with the **space authority** (native scopes covering ``memory.write`` on the
space's namespace) covers everything. Anyone else covers what one of its *live* grants
(not revoked, not expired at ``now``) covers: a capability, for a subject (``subject_ids``
null: every subject), at a placement (a context in ``context_ids``, null: every context; the
shared placement only with ``shared_access``).

Non-amplification: a new grant is issued only when the issuer has the authority, or when one
live grant of the issuer holding ``grants`` contains it whole — its capabilities, subjects,
contexts, shared access and expiry each within that grant's. Requiring one grant to contain
it (not the union of several) is stricter than the union and is never wider than what the
issuer could do itself. That grant is the new one's parent (:func:`parent_of`): revoking it
revokes the new one too (ADR 0082).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from attested_cortex.spoke.models import Capability, MemoryGrant, Placement


@dataclass(frozen=True)
class Want:
    """What one operation needs: a capability, optionally for a subject at a placement."""

    capability: Capability
    subject_id: str | None = None
    placement: Placement | None = None


def live(grants: Iterable[MemoryGrant], now: datetime) -> list[MemoryGrant]:
    """The grants that still hold at ``now``."""
    return [g for g in grants
            if g.revoked_at is None and (g.expires_at is None or g.expires_at > now)]


def grant_covers(grant: MemoryGrant, want: Want) -> bool:
    """Whether one (live) grant covers ``want``."""
    if want.capability not in grant.capabilities:
        return False
    if want.subject_id is not None and grant.subject_ids is not None \
            and want.subject_id not in grant.subject_ids:
        return False
    return want.placement is None or placement_covered(grant, want.placement)


def placement_covered(grant: MemoryGrant, placement: Placement) -> bool:
    """Whether ``grant`` reaches ``placement`` (shared needs ``shared_access``)."""
    if placement.shared:
        return grant.shared_access
    return grant.context_ids is None or placement.context_id in grant.context_ids


def covers(*, authority: bool, grants: Sequence[MemoryGrant], want: Want,
           now: datetime) -> bool:
    """Whether a principal with ``grants`` (and the authority or not) covers ``want``."""
    return authority or any(grant_covers(g, want) for g in live(grants, now))


def contains(outer: MemoryGrant, inner: MemoryGrant) -> bool:
    """Whether ``inner`` is within ``outer`` on every axis (the non-amplification test)."""
    if not set(inner.capabilities) <= set(outer.capabilities):
        return False
    if not _within(outer.subject_ids, inner.subject_ids):
        return False
    if not _within(outer.context_ids, inner.context_ids):
        return False
    if inner.shared_access and not outer.shared_access:
        return False
    if outer.expires_at is None:
        return True
    return inner.expires_at is not None and inner.expires_at <= outer.expires_at


def _within(outer: list[str] | None, inner: list[str] | None) -> bool:
    if outer is None:
        return True
    return inner is not None and set(inner) <= set(outer)


def parent_of(issuer_grants: Sequence[MemoryGrant], new: MemoryGrant,
              now: datetime) -> MemoryGrant | None:
    """The issuer's oldest live grant holding ``grants`` that contains ``new`` whole: the
    grant ``new`` is derived from, and stops with (ADR 0082). None: no such grant."""
    return next((g for g in live(issuer_grants, now)
                 if "grants" in g.capabilities and contains(g, new)), None)


def may_issue(*, authority: bool, issuer_grants: Sequence[MemoryGrant],
              new: MemoryGrant, now: datetime) -> bool:
    """Whether the issuer may issue ``new`` (authority, or one live ``grants`` grant holds it)."""
    return authority or parent_of(issuer_grants, new, now) is not None
