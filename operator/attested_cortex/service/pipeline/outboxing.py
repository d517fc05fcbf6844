"""The outbox events of a write (ADR 0106): the ``post_*`` hook payload of what the write
record covers, appended in the write's transaction right after its record.

Called by :mod:`.write_records` only: every memory, link and transcript write appends its
record there as its last statement before COMMIT (the deep audit names a write without one),
so hooking the outbox to the record is the one place no write path can go around. The payload
is the one a synchronous ``post_*`` hook receives (:mod:`attested_cortex.hooks.payloads`).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final

from attested_cortex.attest.masterkeys import Domain
from attested_cortex.hooks.payloads import payload
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.pipeline.wire_views import link_view, memory_view
from attested_cortex.store import outbox
from attested_cortex.store.database import Conn
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.outbox import OutboxEvent, json_text
from attested_cortex.store.transcripts import Recorded

#: The record event of a write and the hook event its outbox event is named after.
POST_EVENTS: Final = {
    "memory.stored": "post_store", "memory.updated": "post_update",
    "memory.deleted": "post_delete", "link.recorded": "post_link",
    "link.invalidated": "post_invalidate", "transcript.stored": "post_transcript_store",
}
#: Approvals (seed 000 K4): held ones as ``pre_approval``, decided ones as ``post_approval``.


def enabled(svc: Services) -> bool:
    """Whether this server writes the outbox (its schema has it: migration 0038)."""
    return svc.outbox


def memory_event(record: str, memory: Memory) -> OutboxEvent | None:
    """The outbox event of a memory write's record (None for a record that is no event)."""
    name = POST_EVENTS.get(record)
    if name is None:
        return None
    return OutboxEvent(name, f"memory:{memory.id}", memory.namespace,
                       payload(name, **memory_view(memory)))  # type: ignore[arg-type]


def link_event(record: str, link: Link) -> OutboxEvent | None:
    """The outbox event of a link write (links belong to no namespace: every subscription
    to the event receives it)."""
    name = POST_EVENTS.get(record)
    if name is None:
        return None
    return OutboxEvent(name, f"link:{link.id}", None,
                       payload(name, **link_view(link)))  # type: ignore[arg-type]


def transcript_event(row: Recorded, content: str | None) -> OutboxEvent:
    """A stored transcript's event (its text as stored, when the writer hands it over)."""
    t = row.transcript
    fields: dict[str, Any] = {
        "id": str(t.id), "namespace": t.namespace, "content": content or "",
        "metadata": t.metadata, "owner": t.owner, "raw_bytes": t.raw_bytes,
        "stored_bytes": t.stored_bytes, "created_at": t.created_at.isoformat()}
    return OutboxEvent("post_transcript_store", f"transcript:{t.id}", t.namespace,
                       payload("post_transcript_store", **fields))


def seals(svc: Services) -> bool:
    """Whether rows are sealed at rest (``encryption.at_rest``): the outbox's payloads too."""
    return svc.sealer is not None and svc.sealer.seals


def sealed(svc: Services, event: OutboxEvent) -> OutboxEvent:
    """``event`` with its payload sealed under the master key when rows are sealed at rest
    (ADR 0106): the payload becomes ``{sealed, v, id}`` (the AEAD bound to a fresh id);
    the deliverer and the dead-letter API open it. Key, name and namespace stay plain."""
    sealer = svc.sealer
    if sealer is None or not sealer.seals:
        return event
    row_id = uuid.uuid4()
    domain: Domain = "transcripts" if event.key.startswith("transcript:") else "memory"
    version, value = sealer.seal(domain, row_id, json_text(event.payload).encode())
    return dataclasses.replace(event, payload={
        "sealed": base64.b64encode(value).decode(), "v": version, "id": str(row_id),
        "domain": domain})


def opened(sealer: Any, payload: dict[str, Any]) -> dict[str, Any]:
    """A payload as written (:func:`sealed` undone; a plain one as it is). Raises the
    sealer's ``UnsealError`` for one that does not open."""
    if set(payload) != {"sealed", "v", "id", "domain"} or sealer is None:
        return payload
    plain = sealer.open(payload["domain"], uuid.UUID(payload["id"]), int(payload["v"]),
                        base64.b64decode(payload["sealed"]))
    found: dict[str, Any] = json.loads(plain)
    return found


def approval_event(kind: str, action: Any) -> OutboxEvent | None:
    """A held approval as ``pre_approval`` (the operation waits for a human: what a notifier
    needs), a decided or expired one as ``post_approval``, keyed by the approval."""
    fields = {"approval_id": str(action.id), "operation": action.operation,
              "agent_id": action.agent_id, "reason": action.reason or ""}
    key = f"approval:{action.id}"
    if kind == "created":
        return OutboxEvent("pre_approval", key, action.namespace,
                           payload("pre_approval", **fields))
    if kind in ("decided", "expired"):
        return OutboxEvent("post_approval", key, action.namespace, payload(
            "post_approval", **fields, decision=action.status,
            decided_by=action.decided_by or ""))
    return None


def approvals(svc: Services) -> Callable[[Any, str, Any], Awaitable[None]]:
    """The approval service's outbox hook: its event appended in the transaction that holds,
    decides or expires the approval, under the chain lock taken first (that transaction
    appends no record of its own), so sequence order stays commit order."""

    async def append_one(conn: Any, kind: str, action: Any) -> None:
        event = approval_event(kind, action)
        if event is not None and enabled(svc):
            await outbox.lock(conn)
            await outbox.append(conn, [sealed(svc, event)])

    return append_one


async def append(svc: Services, conn: Conn, events: list[OutboxEvent | None]) -> None:
    """Append the events (in the caller's transaction) when the server writes the outbox."""
    if enabled(svc):
        await outbox.append(conn, [sealed(svc, e) for e in events if e is not None])


#: The prefix of a subscription secret sealed at rest: ``sealed:<version>:<base64>``.
SEALED_PREFIX: Final = "sealed:"


def _secret_row(name: str) -> uuid.UUID:
    """The id a subscription's sealed secret is bound to (its name: a sealed secret copied
    to another subscription does not open)."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"attested-cortex:subscription:{name}")


def seal_secret(sealer: Any, name: str, secret: str) -> str:
    """A subscription's signing secret as stored: sealed under the master key (domain
    ``secrets``) when rows are sealed at rest, else as it is."""
    if sealer is None or not sealer.seals:
        return secret
    version, value = sealer.seal("secrets", _secret_row(name), secret.encode())
    return f"{SEALED_PREFIX}{version}:{base64.b64encode(value).decode()}"


def open_secret(sealer: Any, name: str, stored: str) -> str:
    """The signing secret of a stored value (:func:`seal_secret` undone). Raises the
    sealer's ``UnsealError`` for one that does not open (or no key to open it)."""
    if not stored.startswith(SEALED_PREFIX):
        return stored
    if sealer is None:
        from attested_cortex.attest.sealing import UnsealError

        raise UnsealError("the subscription's secret is sealed and no master key is loaded")
    version, _, value = stored[len(SEALED_PREFIX):].partition(":")
    return str(sealer.open("secrets", _secret_row(name), int(version),
                           base64.b64decode(value)).decode())
