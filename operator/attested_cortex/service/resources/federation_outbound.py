"""What this cortex sends a peer: its outbox events as federation wire changes (issue 42,
docs/federation.md, docs/adr/0132). The encoder the sender
(:mod:`attested_cortex.service.workers.federation_sending`) is built with; every change is
checked by the one wire model (:class:`.federation_wire.FederatedChange`) before it leaves.

Sent to a peer: the memory stores, updates and deletes whose namespace matches the peer's
``send`` patterns, and the links (create, invalidate) whose two ends do, made here:
``origin`` and ``home`` are this cortex, ``revision`` the memory's (a link: 1, its
invalidation 2). A change this cortex received from a peer is not sent on (ADR 0132: no
relaying; a change never travels back to its origin), but an agent's signed edit made here
of a memory received from a peer is (ADR 0141): ``origin`` this cortex, ``home`` and
``object_id`` the memory's at its home, ``revision`` above the one applied last. A store or
update carries the signature its agent sent with the write (``memory_signatures`` of that
revision, its key fingerprint, its ``signed_at``); a link the one it was created with. A
delete of an object homed elsewhere stays here (ADR 0141). A delete or an invalidation,
which the local API takes unsigned, is signed by this cortex's identity key (``signer:
origin``, ADR 0138): the receiver checks it with the identity key it holds for us. A store,
update or link made unsigned goes unsigned: the receiver quarantines it, which tells its
administrator (ADR 0122).
"""

from __future__ import annotations

import base64
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.payloads import to_unix_ms
from attested_cortex.attest.peer_changes import ORIGIN_SIGNED_KINDS, SignedChange, sign_origin
from attested_cortex.policy.patterns import matches, parse_pattern
from attested_cortex.service.pipeline.outboxing import opened
from attested_cortex.service.resources.federation_state import PEER_AGENT_PREFIX
from attested_cortex.service.resources.federation_wire import ChangeKind, FederatedChange
from attested_cortex.service.workers.federation_sending import Encode, Outgoing
from attested_cortex.store import federation_sending as rows
from attested_cortex.store.database import Conn
from attested_cortex.store.outbox import Stored
from attested_cortex.store.signatures import MemorySignature

log = logging.getLogger(__name__)

#: The outbox events federation sends, as wire kinds.
KINDS: Final[dict[str, ChangeKind]] = {
    "post_store": "memory.store", "post_update": "memory.update",
    "post_delete": "memory.delete", "post_link": "link.create",
    "post_invalidate": "link.invalidate"}
#: Placeholders the sender replaces per attempt (checked with the model, then dropped).
_PER_ATTEMPT: Final = {"correlation_id": "00000000-0000-4000-8000-000000000000", "seq": 1,
                       "expires_at": 0}


def _ms(value: datetime) -> int:
    return to_unix_ms(value)


def _b64(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def memory_change(cortex: str, kind: ChangeKind, payload: Mapping[str, Any],
                  signature: MemorySignature | None, created_at: datetime,
                  held: rows.Held | None = None) -> dict[str, Any]:
    """The wire fields of a memory change made here (pure): of a memory homed here, or,
    ``held`` given, a local edit of a federated one (its home's id, ADR 0141)."""
    revision = int(payload["revision"])
    fields: dict[str, Any] = {
        "origin": cortex, "home": cortex, "kind": kind, "object_id": payload["id"],
        "revision": revision if held is None else rows.edit_revision(revision, held),
        "author": signature.signed_by if signature else payload["author"],
        "signed_at": _ms(signature.signed_at if signature else created_at),
        "signature": _b64(signature.signature) if signature else None,
        "key_fingerprint": signature.key_fingerprint if signature else None}
    if held is not None:
        fields.update(home=held.home, object_id=str(held.object_id))
    if kind != "memory.delete":
        fields["memory"] = {k: payload[k] for k in ("namespace", "title", "content", "tags",
                                                    "metadata")}
    return fields


def local_edit(cortex: str, kind: ChangeKind, revision: int, held: rows.Held,
               signed: bool, now: int | None) -> bool:
    """Whether an event on a memory that stands for a federated object is an edit made here
    that is sent (ADR 0141): an update an agent of this cortex signed (a change applied from
    a peer never has a signature row), still the memory's state (``now``: else a later
    change superseded it here), or a delete of an object homed here. A store there is the
    peer's; a delete of an object homed elsewhere stays here (no signature speaks for it)."""
    if kind == "memory.update":
        return signed and now == revision
    return kind == "memory.delete" and held.home == cortex


def link_change(cortex: str, kind: ChangeKind, link: rows.LinkRow,
                created_at: datetime) -> dict[str, Any]:
    """The wire fields of a link change made here (pure); only a creation is signed."""
    create = kind == "link.create"
    until = link.asserted_until if create else link.valid_until
    return {
        "origin": cortex, "home": cortex, "kind": kind, "object_id": str(link.id),
        "revision": 1 if create else 2, "author": link.observed_by,
        "signed_at": _ms(link.signed_at if create and link.signed_at else created_at),
        "signature": _b64(link.signature) if create else None, "key_fingerprint": None,
        "link": {"src_home": cortex, "src_id": str(link.src_id), "dst_home": cortex,
                 "dst_id": str(link.dst_id), "relation": link.relation,
                 "valid_from": _ms(link.valid_from),
                 "valid_until": None if until is None else _ms(until)}}


def origin_signed(identity: AgentKey, fields: dict[str, Any]) -> dict[str, Any]:
    """``fields`` of a delete or an invalidation made here, signed by this cortex's
    identity key (ADR 0138); any other change unchanged (pure)."""
    if fields["kind"] not in ORIGIN_SIGNED_KINDS:
        return fields
    link = fields.get("link") or {}
    change = SignedChange(kind=fields["kind"], home=fields["home"],
                          object_id=str(fields["object_id"]), author=fields["author"],
                          signed_at=fields["signed_at"], valid_until=link.get("valid_until"),
                          origin=fields["origin"], revision=fields["revision"])
    return {**fields, "signer": "origin", "signature": sign_origin(identity, change),
            "key_fingerprint": identity.public.fingerprint}


def encoder(cortex: str, send: Mapping[str, Sequence[str]], sealer: Any,
            identity: AgentKey | None = None) -> Encode:
    """The :data:`Encode` of this cortex: ``send`` maps each peer to its patterns;
    ``identity`` signs its deletes and invalidations (None: they go unsigned)."""
    patterns = {peer: tuple(parse_pattern(p) for p in ps) for peer, ps in send.items()}

    def wanted(peer: str, namespace: str | None) -> bool:
        return namespace is not None and any(matches(p, namespace) for p in patterns[peer])

    async def encode(conn: Conn, peer: str, events: Sequence[Stored]) -> list[Outgoing]:
        chosen = [(e, KINDS[e.event]) for e in events if e.event in KINDS
                  and (e.event in ("post_link", "post_invalidate") or wanted(peer, e.namespace))]
        if not chosen:
            return []
        payloads = {e.seq: opened(sealer, e.payload) for e, _ in chosen}
        ids = [uuid.UUID(p["id"]) for p in payloads.values()]
        link_rows = await rows.links(conn, [uuid.UUID(payloads[e.seq]["id"]) for e, k in chosen
                                            if k.startswith("link.")])
        ends = {i for link in link_rows.values() for i in (link.src_id, link.dst_id)}
        held = await rows.imported(conn, [*ids, *ends])
        foreign = {i for i, h in held.items() if h.home != cortex}
        signed = await rows.signatures(conn, [
            (uuid.UUID(payloads[e.seq]["id"]), int(payloads[e.seq]["revision"]))
            for e, k in chosen if k in ("memory.store", "memory.update")])
        now = await rows.current(conn, [i for i in ids if i in held])
        out: list[Outgoing] = []
        for event, kind in chosen:
            payload, object_id = payloads[event.seq], uuid.UUID(payloads[event.seq]["id"])
            fields: dict[str, Any] | None = None
            if kind.startswith("link."):
                link = link_rows.get(object_id)
                if object_id not in held and link is not None and not (
                        {link.src_id, link.dst_id} & foreign) and wanted(
                        peer, link.src_namespace) and wanted(peer, link.dst_namespace):
                    fields = link_change(cortex, kind, link, event.created_at)
            else:
                revision = int(payload["revision"])
                signature = signed.get((object_id, revision))
                standing = held.get(object_id)
                if standing is None and str(payload["author"]).startswith(PEER_AGENT_PREFIX):
                    continue  # stored from a peer, its row not written yet: the peer's
                if standing is None or local_edit(cortex, kind, revision, standing,
                                                  signature is not None, now.get(object_id)):
                    fields = memory_change(cortex, kind, payload, signature, event.created_at,
                                           standing)
            if fields is None:
                continue
            if identity is not None:
                fields = origin_signed(identity, fields)
            try:
                FederatedChange.model_validate({**fields, **_PER_ATTEMPT})
            except ValidationError as exc:  # never expected: the API checked the same fields
                log.warning("federation: event %d cannot be sent (%d errors); skipped",
                            event.seq, exc.error_count())
                continue
            out.append(Outgoing(event.seq, fields))
        return out

    return encode
