"""What a read records in the audit chain: a ``memory.access`` statement of digests only.

Pure. Called by :func:`.recording.audit` after a read operation succeeded, when the server
records reads (``audit.record_reads`` with an audit signer; issue 40, docs/attestation.md
"Read records"). The statement names the operation, the
acting agent, the namespaces asked and answered, how many memories came back and a SHA-256
over their sorted ids, a SHA-256 of the request (the query text, its filters), and the
rule decisions that let it through. Never a memory's text, never the query's: the chain is
readable by every holder of ``audit.read`` and is not sealed at rest, so it must not weaken
encryption at rest (a test greps the chain for canaries).
"""

from __future__ import annotations

import dataclasses
import hashlib
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel

from attested_cortex.service.pipeline.calls import Outcome
from attested_cortex.service.pipeline.operations import OperationSpec

#: Only the first this many ids and namespaces of an answer are walked (a bound per read).
_MAX_ITEMS = 10_000
_MAX_NAMESPACES = 64
_READ_SCOPES = frozenset({"memory.read", "graph.read"})


def is_read(spec: OperationSpec) -> bool:
    """Whether ``spec`` reads memories (and so is recorded as a ``memory.access``)."""
    return not spec.restricted and spec.scope in _READ_SCOPES


def access_record(spec: OperationSpec, outcome: Outcome, call: Any, result: Any,
                  namespaces: tuple[str, ...]) -> dict[str, Any]:
    """The ``memory.access`` statement of one successful read."""
    ids: set[str] = set()
    answered: set[str] = set()
    for memory_id, namespace in _walk(result, 0):
        if len(ids) >= _MAX_ITEMS:
            break
        ids.add(memory_id)
        if namespace is not None:
            answered.add(namespace)
    digest = hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()
    record: dict[str, Any] = {
        "event_type": "memory.access", "operation": spec.name,
        "namespaces": sorted(set(namespaces) | answered)[:_MAX_NAMESPACES],
        "results": len(ids), "results_sha256": digest,
        "request_sha256": _request_digest(call)}
    decided = outcome.summary()
    if decided:
        record["decisions"] = list(decided)
    return record


def _request_digest(call: Any) -> str:
    """SHA-256 over the call's request models as JSON (the query and its filters)."""
    parts: list[str] = []
    if dataclasses.is_dataclass(call):
        for f in dataclasses.fields(call):
            value = getattr(call, f.name, None)
            if isinstance(value, BaseModel):
                parts.append(value.model_dump_json())
            elif isinstance(value, (str, int, uuid.UUID)):
                parts.append(str(value))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _walk(value: Any, depth: int) -> Iterator[tuple[str, str | None]]:
    """Every memory id (with its namespace, when known) an answer carries: recall hits,
    memories, views (dicts with ``id``), and lists or mappings of them."""
    if depth > 4 or value is None:
        return
    memory = getattr(value, "memory", None)
    if memory is not None and hasattr(memory, "id"):
        yield str(memory.id), getattr(memory, "namespace", None)
        return
    if isinstance(value, dict):
        if "id" in value and isinstance(value["id"], (str, uuid.UUID)):
            namespace = value.get("namespace")
            yield str(value["id"]), namespace if isinstance(namespace, str) else None
            return
        for item in value.values():
            if isinstance(item, (list, tuple, dict)):
                yield from _walk(item, depth + 1)
        return
    if isinstance(value, (list, tuple)):
        for item in value[:_MAX_ITEMS]:
            yield from _walk(item, depth + 1)
        return
    if hasattr(value, "id") and hasattr(value, "namespace"):
        yield str(value.id), str(value.namespace)
        return
    for name in ("hits", "memories", "items", "results", "nodes"):
        inner = getattr(value, name, None)
        if isinstance(inner, (list, tuple)):
            yield from _walk(inner, depth + 1)
            return
