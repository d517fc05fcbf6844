"""JSON views of domain objects: what the API returns and what hooks receive."""

from __future__ import annotations

from typing import Any

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
