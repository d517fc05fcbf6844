"""Per-agent request rate: a token bucket per agent, pure apart from the clock it is given.

``capacity`` tokens (one second's worth: a burst of ``rate``), refilled at ``rate`` per
second. :meth:`Buckets.take` answers 0 when a request may go on, or how many whole seconds to
wait (the ``Retry-After`` of the 429). Per replica by design; see
``docs/adr/0010-quotas.md``. Called by the service's quota step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass
class Bucket:
    """One agent's bucket."""

    tokens: float
    stamp: float


@dataclass
class Buckets:
    """Every agent's bucket; agents not seen for a minute are forgotten."""

    rate: float
    overrides: Mapping[str, float] = field(default_factory=dict)
    _buckets: dict[str, Bucket] = field(default_factory=dict)
    _swept: float = 0.0

    def rate_of(self, agent_id: str) -> float:
        """The agent's requests per second."""
        return self.overrides.get(agent_id, self.rate)

    def take(self, agent_id: str, *, now: float) -> int:
        """Spend one token; 0 if there was one, else seconds until there is."""
        rate = self.rate_of(agent_id)
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            bucket = self._buckets[agent_id] = Bucket(rate, now)
            self._sweep(now)
        bucket.tokens = min(rate, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0
        return max(1, math.ceil((1.0 - bucket.tokens) / rate))

    def level(self, agent_id: str, *, now: float) -> float:
        """Tokens the agent has now (for capabilities)."""
        rate = self.rate_of(agent_id)
        bucket = self._buckets.get(agent_id)
        if bucket is None:
            return rate
        return min(rate, bucket.tokens + (now - bucket.stamp) * rate)

    def agents(self) -> int:
        """How many agents have a live bucket."""
        return len(self._buckets)

    def _sweep(self, now: float) -> None:
        if now - self._swept < 60:
            return
        self._swept = now
        stale = [a for a, b in self._buckets.items() if now - b.stamp > 60]
        for agent in stale:
            del self._buckets[agent]
