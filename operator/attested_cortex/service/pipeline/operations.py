"""Every operation the service runs, declared once: the table the pipeline reads.

Each :class:`OperationSpec` says what the operation is (its name, the hook event class and
the events it fires), what it needs (the scope) and how rules see it (the PermissionRule
operation, and whether it is restricted: a write, which falls to the configured write
default when no rule matches). A Call class names its spec; ``tests/server/test_pipeline.py``
checks every route runs one of these, through every step. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from attested_cortex.hooks.events import EventClass, EventName
from attested_cortex.policy.scopes import ScopeBase
from attested_cortex.spoke.operations import MEMORY_OPS


@dataclass(frozen=True)
class OperationSpec:
    """One declared operation."""

    name: str
    event_class: EventClass | None
    pre_events: tuple[EventName, ...]
    post_events: tuple[EventName, ...]
    scope: ScopeBase | None
    rule_operation: str | None
    restricted: bool
    owner_only: bool = False


def _op(name: str, cls: EventClass | None, pre: tuple[EventName, ...],
        post: tuple[EventName, ...], scope: ScopeBase | None, rule: str | None, *,
        restricted: bool = False, owner_only: bool = False) -> OperationSpec:
    return OperationSpec(name, cls, pre, post, scope, rule, restricted, owner_only)


MEMORY_STORE: Final = _op("memory.store", "write", ("pre_store", "pre_index"),
                          ("post_index", "post_store"), "memory.write", "store", restricted=True)
# A batch fires each memory's store events in turn (a Deny of any refuses the whole batch).
MEMORY_STORE_BATCH: Final = _op("memory.store_batch", "write", ("pre_store", "pre_index"),
                                ("post_index", "post_store"), "memory.write", "store",
                                restricted=True)
MEMORY_GET: Final = _op("memory.get", None, (), (), "memory.read", "search")
MEMORY_UPDATE: Final = _op("memory.update", "write", ("pre_update", "pre_index"),
                           ("post_index", "post_update"), "memory.write", "update",
                           restricted=True, owner_only=True)
MEMORY_DELETE: Final = _op("memory.delete", "write", ("pre_delete",), ("post_delete",),
                           "memory.forget", "delete", restricted=True, owner_only=True)
MEMORY_VERIFY: Final = _op("memory.verify", None, (), (), "memory.read", "search")
MEMORY_LIST: Final = _op("memory.list", "read", ("pre_search",), ("post_search",),
                         "memory.read", "search")
RECALL: Final = _op("recall", "read", ("pre_recall",), ("post_recall",), "memory.read",
                    "recall")
LINK_CREATE: Final = _op("link.create", "write", ("pre_link",), ("post_link",), "graph.write",
                         "link", restricted=True)
LINK_VERIFY: Final = _op("link.verify", None, (), (), "graph.read", "kg_query")
LINK_INVALIDATE: Final = _op("link.invalidate", "write", ("pre_invalidate",),
                             ("post_invalidate",), "graph.write", "invalidate",
                             restricted=True, owner_only=True)
MEMORY_LINKS: Final = _op("memory.links", None, (), (), "graph.read", "kg_query")
KG_QUERY: Final = _op("kg.query", "read", ("pre_kg_query",), ("post_kg_query",),
                      "graph.read", "kg_query")
KG_PATHS: Final = _op("kg.paths", "read", ("pre_kg_paths",), ("post_kg_paths",), "graph.read",
                      "kg_paths")
KG_TIMELINE: Final = _op("kg.timeline", "read", ("pre_kg_query",), ("post_kg_query",),
                         "graph.read", "kg_query")
TRANSCRIPT_STORE: Final = _op("transcript.store", "transcript", ("pre_transcript_store",),
                              ("post_transcript_store",), "memory.write", "transcript",
                              restricted=True)
# A replay shows the trail of a memory: its author's (or an agent granted more), like a change.
MEMORY_REPLAY: Final = _op("memory.replay", None, (), (), "memory.read", "transcript",
                           owner_only=True)
AUDIT_VERIFY: Final = _op("audit.verify", None, (), (), "audit.read", None)
# The audit tree (issue 40, ADR 0099): read like the chain itself, by witnesses and auditors.
AUDIT_CHECKPOINT: Final = _op("audit.checkpoint", None, (), (), "audit.read", None)
AUDIT_PROOF: Final = _op("audit.proof", None, (), (), "audit.read", None)
AUDIT_CONSISTENCY: Final = _op("audit.consistency", None, (), (), "audit.read", None)
# Federation (issue 42): the changes peers sent that did not verify, for the administrator.
FEDERATION_QUARANTINE: Final = _op("federation.quarantine", None, (), (), "audit.read", None)
# Where a memory came from: a peer (peer_attested, its origin cortex and signer) or here.
MEMORY_PROVENANCE: Final = _op("memory.provenance", None, (), (), "memory.read", "search")
# The whole cortex (ADR 0033): audit.read here, and memory.read unqualified checked by the call.
EXPORT: Final = _op("cortex.export", None, (), (), "audit.read", None)
CAPABILITIES: Final = _op("capabilities", None, (), (), None, None)
APPROVALS_LIST: Final = _op("approvals.list", None, (), (), "approvals.decide", None)
APPROVALS_STREAM: Final = _op("approvals.stream", None, (), (), "approvals.decide", None)
APPROVAL_DECIDE: Final = _op("approvals.decide", "approval", ("pre_approval",),
                             ("post_approval",), "approvals.decide", None)

# Webhook subscriptions (issue 41, ADR 0106): managed with subscriptions.manage held bare.
SUBSCRIPTIONS: Final = {name: _op(f"subscriptions.{name}", None, (), (),
                                  "subscriptions.manage", None)
                        for name in ("create", "list", "get", "update", "delete", "replay",
                                     "dead_letters.list", "dead_letters.get",
                                     "dead_letters.replay", "dead_letters.purge")}


#: The native read events the family's listing reads fire (ADR 0067).
_SPOKE_READS: Final[dict[str, tuple[EventName, EventName]]] = {
    "memory.recall": ("pre_recall", "post_recall"),
    "memory.records.list": ("pre_search", "post_search"),
}


#: The spoke ops whose effect is forgetting (ADR 0083): a record's tombstone, a candidate's
#: content cleared. They need ``memory.forget`` (a tier's ceiling holds them as it holds a
#: native DELETE) and rules see them as ``delete``. A review that drops is checked by its
#: handler (the decision is in the request).
SPOKE_FORGETS: Final = frozenset({"memory.records.delete", "memory.candidates.dismiss"})


def _spoke(name: str, mutating: bool) -> OperationSpec:
    """A spoke-memory op (ADR 0060): scoped on the space's namespace with the native scope it
    exercises (ADR 0083: ``memory.read``, ``memory.write``, or ``memory.forget`` for
    :data:`SPOKE_FORGETS`), seen by rules as ``search``, ``store`` or ``delete``; its grant
    check runs in the op. Every write fires ``pre_spoke_write``/``post_spoke_write``; recall
    and listing fire the native read events; the other reads fire none, like a native get
    (ADR 0067)."""
    if name in SPOKE_FORGETS:
        return _op(f"spoke.{name}", "write", ("pre_spoke_write",), ("post_spoke_write",),
                   "memory.forget", "delete", restricted=True)
    if mutating:
        return _op(f"spoke.{name}", "write", ("pre_spoke_write",), ("post_spoke_write",),
                   "memory.write", "store", restricted=True)
    if name in _SPOKE_READS:
        pre, post = _SPOKE_READS[name]
        return _op(f"spoke.{name}", "read", (pre,), (post,), "memory.read", "search")
    return _op(f"spoke.{name}", None, (), (), "memory.read", "search")


#: The 33 spoke-memory ops (seed 001), by their wire name (``memory.records.get``).
SPOKE_MEMORY: Final[dict[str, OperationSpec]] = {
    op.name: _spoke(op.name, op.mutating) for op in MEMORY_OPS.values()}

#: Every operation by name.
OPERATIONS: Final[dict[str, OperationSpec]] = {
    spec.name: spec for spec in (
        MEMORY_STORE, MEMORY_STORE_BATCH, MEMORY_GET, MEMORY_UPDATE, MEMORY_DELETE,
        MEMORY_VERIFY, MEMORY_LIST, RECALL,
        LINK_CREATE, LINK_VERIFY, LINK_INVALIDATE, MEMORY_LINKS, KG_QUERY, KG_PATHS,
        KG_TIMELINE, TRANSCRIPT_STORE, MEMORY_REPLAY, AUDIT_VERIFY, AUDIT_CHECKPOINT, AUDIT_PROOF,
        AUDIT_CONSISTENCY, EXPORT, CAPABILITIES, FEDERATION_QUARANTINE, MEMORY_PROVENANCE,
        APPROVALS_LIST, APPROVALS_STREAM, APPROVAL_DECIDE, *SPOKE_MEMORY.values(),
        *SUBSCRIPTIONS.values(),
    )
}
