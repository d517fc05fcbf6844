"""JSON views of memories and links: what the API returns, what hooks receive and what the
outbox carries (:mod:`.outboxing`). Here, below the resources, so the write records' outbox
events and the API answers share one definition; ``resources.views`` and
``resources.graph_views`` re-export them."""

from __future__ import annotations

import base64
from typing import Any

from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory


def memory_view(memory: Memory) -> dict[str, Any]:
    """A memory as API JSON (``unreadable`` only when it is: sealed, it did not open)."""
    view = {
        "id": str(memory.id),
        "namespace": memory.namespace,
        "title": memory.title,
        "content": memory.content,
        "tags": list(memory.tags),
        "metadata": memory.metadata,
        "author": memory.author,
        "revision": memory.revision,
        "created_at": memory.created_at.isoformat(),
        "updated_at": memory.updated_at.isoformat(),
        "deleted": memory.deleted,
        "deleted_at": memory.deleted_at.isoformat() if memory.deleted_at else None,
    }
    if memory.unreadable:
        view["unreadable"] = True
    return view


def link_view(link: Link) -> dict[str, Any]:
    """A link as API JSON."""
    return {
        "id": str(link.id),
        "src_id": str(link.src_id),
        "dst_id": str(link.dst_id),
        "relation": link.relation,
        "valid_from": link.valid_from.isoformat(),
        "valid_until": link.valid_until.isoformat() if link.valid_until else None,
        "observed_by": link.observed_by,
        "attest_level": link.attest_level,
        "signed_by": link.signed_by,
        "signature": base64.b64encode(link.signature).decode() if link.signature else None,
        "signed_at": link.signed_at.isoformat() if link.signed_at else None,
        "created_at": link.created_at.isoformat(),
    }
