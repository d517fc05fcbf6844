"""Agent capability scopes (seed 003, Deliverable 4): ``base`` or ``base:qualifier``.

A base names what an agent may do; the optional qualifier is a memory-namespace pattern
(:mod:`.patterns`) that narrows it, e.g. ``memory.read:team-a/**``. Attenuation rules:

1. bases must match exactly;
2. an unqualified held scope grants any qualified need of the same base;
3. a qualified held scope grants a qualified need iff its pattern covers the need's;
4. a qualified held scope does not grant an unqualified need.

A qualifier that admits every namespace (``**`` and its equivalents, :func:`.patterns.whole`)
narrows nothing: such a scope is **bare** wherever "qualified" matters (a tier's ▲ mark,
:meth:`ScopeSet.holds`).

A delegated set (a token's scopes under the agent's, a request's ``X-Cortex-Scopes`` under
its token's) may only narrow: :func:`attenuate` refuses anything its parent does not grant.
Pure; the service's scope step and the authenticators call it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final, Literal, cast, get_args

from attested_cortex.errors import DeniedError, InvalidInputError
from attested_cortex.policy.patterns import covers, parse_pattern, whole

ScopeBase = Literal[
    "memory.read", "memory.write", "memory.forget", "memory.override", "graph.read",
    "graph.write", "audit.read", "approvals.decide", "subscriptions.manage",
]
BASES: Final[frozenset[str]] = frozenset(get_args(ScopeBase))


@dataclass(frozen=True)
class Scope:
    """One scope; ``pattern`` is None when unqualified."""

    base: ScopeBase
    pattern: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return self.base if self.pattern is None else f"{self.base}:{'/'.join(self.pattern)}"

    @property
    def bare(self) -> bool:
        """Unqualified, or qualified by a pattern that admits every namespace."""
        return self.pattern is None or whole(self.pattern)

    def is_granted_by(self, held: Scope) -> bool:
        """Seed 003's one authoritative check (rules 1-4 above)."""
        if held.base != self.base:
            return False
        if held.pattern is None:
            return True
        return self.pattern is not None and covers(held.pattern, self.pattern)


def parse_scope(text: str) -> Scope:
    """``base`` or ``base:pattern``; an unknown base or bad pattern is InvalidInputError."""
    base, sep, qualifier = text.strip().partition(":")
    if base not in BASES:
        raise InvalidInputError(f"unknown scope {base!r}; known: {', '.join(sorted(BASES))}",
                                field="scopes")
    if sep and not qualifier:
        raise InvalidInputError(f"scope {text!r} has an empty qualifier", field="scopes")
    return Scope(cast(ScopeBase, base), parse_pattern(qualifier) if sep else None)


@dataclass(frozen=True)
class ScopeSet:
    """The scopes an agent holds (sorted, deduplicated). Answers are memoised per set: a
    recall asks about the same few namespaces for every hit."""

    scopes: tuple[Scope, ...]
    _memo: dict[tuple[str, str | None], bool] = field(
        default_factory=dict, compare=False, hash=False, repr=False)

    @classmethod
    def parse(cls, texts: Iterable[str]) -> ScopeSet:
        """Parse each scope; duplicates collapse."""
        return cls(tuple(sorted({parse_scope(t) for t in texts}, key=str)))

    def grants(self, needed: Scope) -> bool:
        """Whether any held scope grants ``needed``."""
        return any(needed.is_granted_by(held) for held in self.scopes)

    def allows(self, base: ScopeBase, namespace: str | None) -> bool:
        """Whether the agent may use ``base`` in ``namespace`` (None: in some namespace,
        for operations addressed by id whose namespaces are checked one by one)."""
        key = (base, namespace)
        found = self._memo.get(key)
        if found is None:
            if namespace is None:
                found = any(held.base == base for held in self.scopes)
            else:
                found = self.grants(Scope(base, tuple(namespace.split("/"))))
            if len(self._memo) >= 4096:
                self._memo.clear()
            self._memo[key] = found
        return found

    def holds(self, base: ScopeBase) -> bool:
        """Whether the base is held bare (everywhere: unqualified, or ``base:**``)."""
        return any(held.base == base and held.bare for held in self.scopes)

    def __str__(self) -> str:
        return " ".join(str(s) for s in self.scopes)


#: Every base, unqualified except ``memory.override``: what an agent holds when its
#: configuration names no scopes (acting on other agents' memories is never implicit).
DEFAULT: Final = ScopeSet(tuple(Scope(cast(ScopeBase, b))
                                for b in sorted(BASES - {"memory.override"})))
ALL: Final = ScopeSet(tuple(Scope(cast(ScopeBase, b)) for b in sorted(BASES)))


def attenuate(parent: ScopeSet, requested: ScopeSet) -> ScopeSet:
    """``requested`` if every scope in it is granted by ``parent`` (delegation only
    narrows); DeniedError naming the first wider scope otherwise."""
    for scope in requested.scopes:
        if not parent.grants(scope):
            raise DeniedError(
                f"scope {scope} is wider than what the caller holds ({parent})",
                code="scope_widening", scope=str(scope), decision="deny",
            )
    return requested
