"""Trust tiers and their scope ceilings (seed 003, Deliverables 4-5; ADR 0049).

A caller's credential carries a tier: ``Trusted``, ``SemiTrusted`` or ``Untrusted``
(``Kernel`` is the server's own work: sweepers, migrations, the operator's jobs; a caller
presenting it is refused). Each tier has a **ceiling** that marks every scope base:

* ``granted``: held scopes of the base pass unchanged (the seed's ✓);
* ``qualified`` (optionally ``qualified:<pattern>``): only *qualified* held scopes pass,
  and with a pattern only those inside it; a bare ``memory.read`` does not satisfy the
  mark (the seed's ▲), nor does one qualified by a pattern that admits every namespace
  (``memory.read:**``, ``*/**``: :attr:`.scopes.Scope.bare`);
* ``denied``: nothing of the base passes (⊘).

The effective scopes of a request are ``held ∩ ceiling`` (:func:`confine`), computed once
when the caller is authenticated, before anything else looks at the request. Defaults follow
the seed's table; a MemoryCortex overrides single marks (``spec.trust.ceilings``), merged
over :data:`DEFAULTS` by :func:`ceilings`. Pure; the authenticator wrapper
(:mod:`attested_cortex.server.auth`) and the scope step call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, cast, get_args

from attested_cortex.errors import DeniedError, InvalidInputError
from attested_cortex.policy.patterns import covers, parse_pattern
from attested_cortex.policy.scopes import BASES, Scope, ScopeBase, ScopeSet

TrustTier = Literal["Trusted", "SemiTrusted", "Untrusted", "Kernel"]
TIERS: Final[tuple[str, ...]] = get_args(TrustTier)
#: The tiers a credential may carry (Kernel is refused) and a MemoryCortex may tune.
CALLER_TIERS: Final[tuple[str, ...]] = ("Trusted", "SemiTrusted", "Untrusted")
#: The tier of a credential that names none (ADR 0049: existing agents keep their scopes).
DEFAULT_TIER: Final[TrustTier] = "Trusted"
#: The mark syntax, for the CRD's validation and the server settings.
MARK_PATTERN: Final = r"^(granted|denied|qualified(:[A-Za-z0-9_\-.:@*/]{1,512})?)$"


@dataclass(frozen=True)
class Mark:
    """One ceiling mark: ``granted``, ``denied``, or ``qualified`` within ``within``."""

    kind: Literal["granted", "qualified", "denied"]
    within: tuple[str, ...] | None = None

    def __str__(self) -> str:
        if self.kind == "qualified" and self.within is not None:
            return f"qualified:{'/'.join(self.within)}"
        return self.kind

    def admits(self, held: Scope) -> bool:
        """Whether a held scope passes this mark."""
        if self.kind == "granted":
            return True
        if self.kind == "denied" or held.pattern is None or held.bare:
            return False
        return self.within is None or covers(self.within, held.pattern)


def parse_mark(text: str) -> Mark:
    """``granted`` | ``denied`` | ``qualified`` | ``qualified:<namespace pattern>``."""
    kind, sep, within = text.strip().partition(":")
    if kind in ("granted", "denied") and not sep:
        return Mark(cast(Literal["granted", "denied"], kind))
    if kind == "qualified":
        return Mark("qualified", parse_pattern(within) if sep else None)
    raise InvalidInputError(f"ceiling mark {text!r} must be granted, denied, qualified or "
                            "qualified:<namespace pattern>", field="trust.ceilings")


GRANTED: Final = Mark("granted")
QUALIFIED: Final = Mark("qualified")
DENIED: Final = Mark("denied")
PUBLIC: Final = Mark("qualified", ("public", "**"))

#: Seed 003's table for memory.* and audit.read; Trusted only for graph.*, approvals.decide,
#: memory.override and subscriptions.manage (a subscription reads every namespace it
#: names). Kernel: everything (never a caller's).
DEFAULTS: Final[Mapping[str, Mapping[str, Mark]]] = {
    "Kernel": dict.fromkeys(BASES, GRANTED),
    "Trusted": dict.fromkeys(BASES, GRANTED),
    "SemiTrusted": {
        "memory.read": GRANTED, "memory.write": GRANTED, "memory.forget": QUALIFIED,
        "memory.override": DENIED, "graph.read": DENIED, "graph.write": DENIED,
        "audit.read": QUALIFIED, "approvals.decide": DENIED, "subscriptions.manage": DENIED,
    },
    "Untrusted": {
        "memory.read": PUBLIC, "memory.write": DENIED, "memory.forget": DENIED,
        "memory.override": DENIED, "graph.read": DENIED, "graph.write": DENIED,
        "audit.read": PUBLIC, "approvals.decide": DENIED, "subscriptions.manage": DENIED,
    },
}


def parse_tier(text: str, *, field: str = "trust_tier") -> TrustTier:
    """A tier name; anything else is InvalidInputError naming the known ones."""
    if text not in TIERS:
        raise InvalidInputError(f"unknown trust tier {text!r}; known: {', '.join(TIERS)}",
                                field=field)
    return cast(TrustTier, text)


@dataclass(frozen=True)
class Ceiling:
    """One tier's marks over every scope base."""

    tier: TrustTier
    marks: Mapping[str, Mark]

    def mark(self, base: str) -> Mark:
        return self.marks.get(base, DENIED)

    def confine(self, held: ScopeSet) -> ScopeSet:
        """``held ∩ ceiling``: the held scopes this tier's marks admit."""
        return ScopeSet(tuple(s for s in held.scopes if self.mark(s.base).admits(s)))

    def describe(self) -> dict[str, str]:
        return {base: str(self.mark(base)) for base in sorted(BASES)}


#: Tier -> ceiling, the server's whole trust configuration.
Ceilings = Mapping[str, Ceiling]


def ceilings(overrides: Mapping[str, Mapping[str, str]] | None = None) -> dict[str, Ceiling]:
    """:data:`DEFAULTS` with ``overrides`` (tier -> scope base -> mark text) merged in; an
    unknown tier or base, Kernel, or a bad mark is InvalidInputError."""
    merged = {tier: dict(marks) for tier, marks in DEFAULTS.items()}
    for tier, marks in (overrides or {}).items():
        if tier not in CALLER_TIERS:
            raise InvalidInputError(f"trust.ceilings: tier {tier!r} cannot be tuned; only "
                                    f"{', '.join(CALLER_TIERS)}", field="trust.ceilings")
        for base, text in marks.items():
            if base not in BASES:
                raise InvalidInputError(f"trust.ceilings.{tier}: unknown scope {base!r}",
                                        field="trust.ceilings")
            merged[tier][base] = parse_mark(text)
    return {tier: Ceiling(cast(TrustTier, tier), marks) for tier, marks in merged.items()}


def refuse_kernel(tier: TrustTier, agent_id: str) -> None:
    """A caller presenting Kernel is refused: that tier is the server's own."""
    if tier == "Kernel":
        raise DeniedError(
            f"agent {agent_id} presents trust tier Kernel, which is the server's own work "
            "only", code="trust_ceiling", tier="Kernel", scope=None, mark="kernel-only",
            decision="deny", source="trust_ceiling")


def lower(tier: TrustTier, requested: str) -> TrustTier:
    """A caller may lower its own tier for one request (``X-Cortex-Trust-Tier``, e.g. an
    agent relaying an untrusted channel), never raise it (403)."""
    wanted = parse_tier(requested, field="X-Cortex-Trust-Tier")
    if wanted == "Kernel" or CALLER_TIERS.index(wanted) < CALLER_TIERS.index(tier):
        raise DeniedError(f"trust tier {wanted} is above the credential's {tier}",
                          code="trust_ceiling", tier=tier, scope=None, mark="above-credential",
                          decision="deny", source="trust_ceiling")
    return wanted


def ceiling_refusal(agent_id: str, ceiling: Ceiling, base: ScopeBase,
            namespace: str | None) -> DeniedError:
    """The 403 ``trust_ceiling`` of a held scope the tier's ceiling removed."""
    mark = ceiling.mark(base)
    where = f" in namespace {namespace!r}" if namespace else ""
    return DeniedError(
        f"agent {agent_id} holds {base}{where} but its trust tier {ceiling.tier} "
        f"caps it ({base}: {mark})", code="trust_ceiling", tier=ceiling.tier, scope=base,
        mark=str(mark), namespace=namespace, decision="deny", source="trust_ceiling",
        reason=f"trust tier {ceiling.tier} ceiling {base}: {mark}")
