"""What every controller is handed: the writer, the work queue, the watched views and the
operator-wide defaults. Built once at start-up by :mod:`.registry`; frozen.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attested_cortex.builders.inputs import Defaults
from attested_cortex.controller.applying import Writer
from attested_cortex.controller.queueing import Key, WorkQueue

Object = dict[str, Any]
IndexKey = tuple[str, str]


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

    def enqueue(self, kind: str, namespace: str, name: str, delay: float = 0.0) -> None:
        """Ask for a reconcile of one object."""
        self.queue.add(Key(kind, namespace, name), delay)
