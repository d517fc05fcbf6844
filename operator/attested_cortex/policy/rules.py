"""Permission rules and the leaf-to-root walk that finds the one deciding a request.

The server settings carry the rules the operator compiled from PermissionRule objects;
:func:`compile_rules` turns them into :class:`Rule` values once at start-up and
:class:`RuleSet.evaluate` answers a :class:`~.decisions.Decision` per request. The walk is
specified in ``docs/adr/0009-permissions.md``:

1. Candidate rules are those whose ``agents`` admit the agent (ids or ``fnmatch`` globs) and
   whose ``operations`` include the operation (or ``*``).
2. Walk the request's namespace leaf to root (``a/b/c``, ``a/b``, ``a``). At the leaf, every
   candidate whose pattern matches the leaf applies. At an ancestor, candidates matching
   the ancestor with ``inherit: true`` apply.
3. The first level with an applicable rule decides: highest ``priority``, then the
   strictest decision (Deny > AskUser > Allow), then the earliest rule.
4. A rule with ``inherit: false`` matching an ancestor is a barrier: nothing above that
   ancestor governs the request (the rule itself governs only the namespaces it matches).
5. No rule: Allow for reads, the configured write default for writes.

Pure, and cached per (agent, operation) so a request costs a dict lookup plus at most
eight small scans.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

from attested_cortex.namespaces import ancestors
from attested_cortex.policy.decisions import Decision, Verdict
from attested_cortex.policy.patterns import matches, parse_pattern

_RANK: Final[dict[Verdict, int]] = {"allow": 0, "ask_user": 1, "deny": 2}


class RuleInput(Protocol):
    """The fields of one configured rule (``server.settings.RuleSettings``)."""

    @property
    def source(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def agents(self) -> list[str]: ...
    @property
    def operations(self) -> list[str]: ...
    @property
    def decision(self) -> Verdict: ...
    @property
    def inherit(self) -> bool: ...
    @property
    def priority(self) -> int: ...
    @property
    def reason(self) -> str | None: ...


@dataclass(frozen=True)
class Rule:
    """One compiled rule; ``order`` is its position in the configuration."""

    source: str
    pattern: tuple[str, ...]
    agents: tuple[str, ...]
    operations: frozenset[str]
    verdict: Verdict
    inherit: bool = True
    priority: int = 0
    reason: str | None = None
    order: int = 0

    def admits(self, agent_id: str) -> bool:
        """Whether the rule names ``agent_id`` (exactly or by glob)."""
        return any(a == agent_id or fnmatch.fnmatchcase(agent_id, a) for a in self.agents)

    def names(self, agent_id: str) -> bool:
        """Whether the rule names ``agent_id`` literally (an explicit grant, not a glob)."""
        return agent_id in self.agents

    def covers(self, operation: str) -> bool:
        """Whether the rule governs ``operation``."""
        return "*" in self.operations or operation in self.operations

    def summary(self) -> str:
        """One line for ``rule_summary``."""
        scope = "" if self.inherit else " (no inherit)"
        why = f": {self.reason}" if self.reason else ""
        return (f"[{self.priority}] {self.verdict} {','.join(sorted(self.operations))} "
                f"in {'/'.join(self.pattern)}{scope} for {','.join(self.agents)} "
                f"({self.source}){why}")


def compile_rules(rows: Iterable[RuleInput]) -> tuple[Rule, ...]:
    """Rules from configuration, in order; a bad pattern raises InvalidInputError."""
    return tuple(
        Rule(source=r.source, pattern=parse_pattern(r.namespace), agents=tuple(r.agents),
             operations=frozenset(r.operations), verdict=r.decision, inherit=r.inherit,
             priority=r.priority, reason=r.reason, order=i)
        for i, r in enumerate(rows)
    )


@dataclass(frozen=True)
class Verdicts:
    """What the walk found: the deciding rule (None: no rule applies)."""

    rule: Rule | None

    def decision(self, *, default: Verdict) -> Decision:
        """The rule's Decision, or ``default`` attributed to ``default``."""
        if self.rule is None:
            return Decision(default, "default", None if default == "allow" else
                            "no permission rule allows this operation", "no_rule")
        rule = self.rule
        reason = rule.reason or f"{rule.verdict} by rule {rule.source}"
        return Decision(rule.verdict, f"rule:{rule.source}", reason, "rule_" + rule.verdict)


@dataclass
class RuleSet:
    """The configured rules with a per (agent, operation) candidate cache."""

    rules: Sequence[Rule] = ()
    _cache: dict[tuple[str, str], tuple[Rule, ...]] = field(default_factory=dict)

    def add(self, rules: Iterable[Rule]) -> None:
        """Append rules (remembered approvals) and forget the cached candidates."""
        self.rules = (*self.rules, *rules)
        self._cache.clear()

    def candidates(self, agent_id: str, operation: str) -> tuple[Rule, ...]:
        """Rules for this agent and operation (cached; the cache is bounded)."""
        key = (agent_id, operation)
        found = self._cache.get(key)
        if found is None:
            found = tuple(r for r in self.rules if r.covers(operation) and r.admits(agent_id))
            if len(self._cache) >= 65536:
                self._cache.clear()
            self._cache[key] = found
        return found

    def evaluate(self, *, agent_id: str, operation: str, namespace: str | None) -> Verdicts:
        """The deciding rule for ``operation`` by ``agent_id`` in ``namespace`` (None: the
        operation names no namespace; only patterns matching every namespace, ``**``,
        apply)."""
        candidates = self.candidates(agent_id, operation)
        if not candidates:
            return Verdicts(None)
        if namespace is None:
            return Verdicts(_pick([r for r in candidates if r.pattern == ("**",)]))
        for level, name in enumerate(ancestors(namespace)):
            here = [r for r in candidates if matches(r.pattern, name)]
            applicable = here if level == 0 else [r for r in here if r.inherit]
            if applicable:
                return Verdicts(_pick(applicable))
            if level > 0 and any(not r.inherit for r in here):
                break
        return Verdicts(None)


def _pick(rules: Sequence[Rule]) -> Rule | None:
    if not rules:
        return None
    return min(rules, key=lambda r: (-r.priority, -_RANK[r.verdict], r.order))
