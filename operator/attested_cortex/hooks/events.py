"""The hook events, their classes and the class deadlines: one table for the whole product.

The hook pipeline, the HookChain CRD (CEL bound on ``timeoutMs``) and the documentation all
read this module, so an event exists in exactly one place. Pure data, no imports of the rest
of the package: anything may import it.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

EventClass = Literal["write", "read", "index", "transcript", "approval"]

#: Every hook event name: the type of the hook config's ``events``, the HookChain CRD's
#: ``events`` and every fire call of the service layer (mypy checks all three).
EventName = Literal[
    "pre_store", "post_store", "pre_update", "post_update", "pre_delete", "post_delete",
    "pre_link", "post_link", "pre_invalidate", "post_invalidate",
    "pre_recall", "post_recall", "pre_search", "post_search",
    "pre_kg_query", "post_kg_query", "pre_kg_paths", "post_kg_paths",
    "pre_index", "post_index", "pre_transcript_store", "post_transcript_store",
    "pre_approval", "post_approval", "pre_spoke_write", "post_spoke_write",
]  # fmt: skip

#: Deadline of a whole chain per class, in milliseconds (seed 000, Decision 2).
CLASS_DEADLINES_MS: Final[dict[EventClass, int]] = {
    "write": 5000,
    "read": 2000,
    "index": 1000,
    "transcript": 5000,
    "approval": 5000,
}

#: Every event and its class. ``pre_*`` events may Modify; ``post_*`` events observe.
EVENTS: Final[dict[EventName, EventClass]] = {
    "pre_store": "write",
    "post_store": "write",
    "pre_update": "write",
    "post_update": "write",
    "pre_delete": "write",
    "post_delete": "write",
    "pre_link": "write",
    "post_link": "write",
    "pre_invalidate": "write",
    "post_invalidate": "write",
    "pre_recall": "read",
    "post_recall": "read",
    "pre_search": "read",
    "post_search": "read",
    "pre_kg_query": "read",
    "post_kg_query": "read",
    "pre_kg_paths": "read",
    "post_kg_paths": "read",
    "pre_index": "index",
    "post_index": "index",
    "pre_transcript_store": "transcript",
    "post_transcript_store": "transcript",
    "pre_approval": "approval",
    "post_approval": "approval",
    # Every mutating op of the spoke-memory family (ADR 0067); its reads fire the native
    # read events (memory.recall: pre/post_recall; memory.records.list: pre/post_search).
    "pre_spoke_write": "write",
    "post_spoke_write": "write",
}

assert set(EVENTS) == set(get_args(EventName)), "EVENTS and EventName name the same events"
_CLASS_OF: Final[dict[str, EventClass]] = {str(k): v for k, v in EVENTS.items()}

#: Events on the hot read path: exec mode there needs an explicit override, and
#: ``post_recall``/``post_search`` default to daemon mode.
HOT_PATH_EVENTS: Final[frozenset[str]] = frozenset(
    name for name, cls in EVENTS.items() if cls == "read"
)


def deadline_ms(event: str) -> int:
    """The class deadline of ``event``; raises ``KeyError`` for an unknown event."""
    return CLASS_DEADLINES_MS[_CLASS_OF[event]]


def is_pre(event: str) -> bool:
    """Whether ``event`` runs before the operation (and so may Modify its payload)."""
    return event.startswith("pre_")
