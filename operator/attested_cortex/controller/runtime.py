"""What every controller is handed: the writer, the work queue, the watched views and the
operator-wide defaults. Built once at start-up by :mod:`.registry`; frozen.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attested_cortex.builders.inputs import Defaults
from attested_cortex.controller.applying import Writer
from attested_cortex.controller.queueing import Key, WorkQueue
from attested_cortex.kubeclient import ConflictError

Object = dict[str, Any]
IndexKey = tuple[str, str]
NAMESPACE_UID_TTL_S = 30.0
#: A burst of satellite changes settles once none came for this long (seconds)...
SETTLE_QUIET_S = 2.0
#: ...and a cortex waits at most this long after the first (so a steady trickle still rolls).
SETTLE_LONGEST_S = 20.0


def snapshot(body: Mapping[str, Any]) -> Object:
    """A private copy of a watched body (kopf reuses nothing, but callers may mutate)."""
    return copy.deepcopy(dict(body))


@dataclass
class Views:
    """kopf's live indices of the custom resources (filled before any handler runs).

    ``by_name[kind]``: (namespace, name) -> body; ``by_cortex[kind]``: (namespace, cortex)
    -> bodies of that satellite kind. Bound from the first handler call that carries them.
    """

    by_name: dict[str, Mapping[IndexKey, Iterable[Object]]] = field(default_factory=dict)
    by_cortex: dict[str, Mapping[IndexKey, Iterable[Object]]] = field(default_factory=dict)

    def get(self, kind: str, namespace: str, name: str) -> Object | None:
        """The current body of one object, or None."""
        store = self.by_name.get(kind, {}).get((namespace, name))
        return next(iter(store), None) if store is not None else None

    def of_cortex(self, kind: str, namespace: str, cortex: str) -> list[Object]:
        """Every satellite of ``kind`` that names ``cortex``."""
        store = self.by_cortex.get(kind, {}).get((namespace, cortex))
        return list(store) if store is not None else []


@dataclass(frozen=True)
class Runtime:
    """The operator's shared handles."""

    writer: Writer
    queue: WorkQueue
    views: Views
    defaults: Defaults
    #: kopf serves the watch on CloudNativePG Clusters (ADR 0029); else passes poll them.
    watches_clusters: bool = False

    namespace_uids: dict[str, tuple[float, str]] = field(default_factory=dict)

    async def namespace_uid(self, namespace: str) -> str:
        """A Namespace's uid, remembered for :data:`NAMESPACE_UID_TTL_S`: a namespace deleted
        and made again under the same name has a new uid, and an owner reference to the old
        one would be collected, so the memory is short."""
        now = time.monotonic()
        seen = self.namespace_uids.get(namespace)
        if seen is not None and now - seen[0] < NAMESPACE_UID_TTL_S:
            return seen[1]
        body = await self.writer.get("v1", "Namespace", None, namespace)
        uid = str(((body or {}).get("metadata") or {}).get("uid", ""))
        if uid:
            self.namespace_uids[namespace] = (now, uid)
        return uid

    async def create_once(self, make: Callable[[], Object], namespace: str, name: str) -> None:
        """Create a generated object (a Secret) unless it exists; ``make`` runs only when
        the object is missing, and a create that loses a race (409) adopts the winner's."""
        if self.views.get("Secret", namespace, name) is not None:
            return
        try:
            await self.writer.create(make())
        except ConflictError:
            return

    def enqueue(self, kind: str, namespace: str, name: str, delay: float = 0.0) -> None:
        """Ask for a reconcile of one object."""
        self.queue.add(Key(kind, namespace, name), delay)

    def settle(self, kind: str, namespace: str, name: str) -> None:
        """Ask for one reconcile once a burst of changes settles (queueing.WorkQueue.settle)."""
        self.queue.settle(Key(kind, namespace, name), quiet=SETTLE_QUIET_S,
                          longest=SETTLE_LONGEST_S)

    def settling(self, kind: str, namespace: str, name: str) -> bool:
        """Whether changes that concern this object are still arriving."""
        return self.queue.settling(Key(kind, namespace, name))
