"""The outbound sender's schedule and its reading of a batch's answers (ADR 0132): pure, no
service. The whole path (real servers, mTLS, a partition) is
tests/server/test_federation_outbound.py."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.peer_changes import SignedChange, check_origin
from attested_cortex.errors import NotReadyError
from attested_cortex.server.federation_client import wire_body
from attested_cortex.service.resources.federation_outbound import (
    link_change,
    local_edit,
    memory_change,
    origin_signed,
)
from attested_cortex.service.resources.federation_wire import ChangeBatch, FederatedChange
from attested_cortex.service.workers.federation_sending import (
    BATCH_REFUSED,
    Ack,
    FederationSender,
    Outgoing,
    SendSettings,
    _PeerState,
    correlation_id,
    delay,
)
from attested_cortex.store.federation_sending import Held, LinkRow, edit_revision
from attested_cortex.store.outbox import Stored
from attested_cortex.store.signatures import MemorySignature

AT = datetime(2026, 5, 5, 12, 0, tzinfo=UTC)


def test_retries_wait_1_5_25_then_double_to_the_cap() -> None:
    settings = SendSettings()
    assert [delay(n, settings) for n in range(1, 8)] == [1, 5, 25, 50, 60, 60, 60]


def test_batch_cut_at_the_first_change_not_accepted() -> None:
    outgoing = [Outgoing(seq, {}) for seq in (3, 7, 9)]
    state = _PeerState(ids={3: uuid.uuid4(), 7: uuid.uuid4(), 9: uuid.uuid4()})
    acks = [Ack(3, True, "stored"), Ack(7, False, "retry"), Ack(9, False, "retry")]
    assert FederationSender._walk(outgoing, acks, state, 12) == (6, 1, "retry")
    assert 7 in state.ids  # the same correlation id on the retry
    assert FederationSender._walk(outgoing, [Ack(3, True, "stored"), Ack(7, False, "expired")],
                                  state, 12) == (6, 1, "expired")
    assert 7 not in state.ids and state.copies[7] == 1  # sent again as a fresh copy
    done = [Ack(s, True, "duplicate") for s in (3, 7, 9)]
    assert FederationSender._walk(outgoing, done, state, 12) == (12, 3, None)
    assert FederationSender._walk(outgoing, [Ack(7, True, "stored")], state, 12) == (
        2, 0, "answer_out_of_order")


@pytest.mark.parametrize("signed", [True, False])
def test_memory_change_is_a_valid_wire_change(signed: bool) -> None:
    memory_id = uuid.uuid4()
    signature = MemorySignature(memory_id, 2, b"\x01" * 64, "ab" * 32, "dev:writer", AT,
                                "peer_attested") if signed else None
    payload = {"id": str(memory_id), "revision": 2, "author": "dev:owner",
               "namespace": "team/notes", "title": "t", "content": "c", "tags": ["x"],
               "metadata": {"k": 1}}
    fields = memory_change("cortex-a", "memory.update", payload, signature, AT)
    change = FederatedChange.model_validate({
        **fields, "seq": 5, "expires_at": 1, "correlation_id": str(uuid.uuid4())})
    assert (change.origin, change.home, change.revision) == ("cortex-a", "cortex-a", 2)
    assert change.author == ("dev:writer" if signed else "dev:owner")
    assert change.signed_at == 1_777_982_400_000
    assert (change.signature is not None) is signed


def test_an_edit_of_a_received_memory_goes_as_this_cortexs_change_of_the_home_object(
        ) -> None:
    local, home_id = uuid.uuid4(), uuid.uuid4()
    signature = MemorySignature(local, 3, b"\x01" * 64, "ab" * 32, "dev:writer-b", AT,
                                "peer_attested")
    payload = {"id": str(local), "revision": 3, "author": "dev:writer-a",
               "namespace": "fed/a/team/notes", "title": "", "content": "b's words",
               "tags": [], "metadata": {}}
    held = Held("cortex-a", home_id, 4)  # b applied a's revision 4 as its local revision 2
    fields = memory_change("cortex-b", "memory.update", payload, signature, AT, held)
    change = FederatedChange.model_validate({
        **fields, "seq": 5, "expires_at": 1, "correlation_id": str(uuid.uuid4())})
    assert (change.origin, change.home, change.object_id) == ("cortex-b", "cortex-a", home_id)
    assert change.revision == 5 and change.author == "dev:writer-b"  # outranks what b held
    assert edit_revision(7, held) == 7


def test_only_edits_made_here_are_sent_of_memories_homed_elsewhere() -> None:
    held = Held("cortex-a", uuid.uuid4(), 1)
    assert local_edit("cortex-b", "memory.update", 2, held, True, 2)
    assert not local_edit("cortex-b", "memory.update", 2, held, False, 2)  # applied from a peer
    assert not local_edit("cortex-b", "memory.update", 2, held, True, 3)  # superseded here
    assert not local_edit("cortex-b", "memory.update", 2, held, True, None)  # deleted since
    assert not local_edit("cortex-b", "memory.store", 1, held, True, 1)
    assert not local_edit("cortex-b", "memory.delete", 2, held, False, None)  # not b's object
    assert local_edit("cortex-a", "memory.delete", 2, held, False, None)  # a's own, edited by b


def test_deletes_and_invalidations_signed_by_the_origin_cortex() -> None:
    """ADR 0138: the sender signs a delete with the cortex identity; the statement verifies
    under that key only for the exact change, an object homed at the origin, a delete or
    an invalidation."""
    identity, other = generate_key("cortex-a"), generate_key("cortex-b")  # type: ignore[arg-type]
    memory_id = uuid.uuid4()
    payload = {"id": str(memory_id), "revision": 3, "author": "dev:owner"}
    fields = origin_signed(identity, memory_change("cortex-a", "memory.delete", payload,
                                                   None, AT))
    change = FederatedChange.model_validate({
        **fields, "seq": 5, "expires_at": 1, "correlation_id": str(uuid.uuid4())})
    assert change.signer == "origin"
    assert change.key_fingerprint == identity.public.fingerprint
    keys = {"cortex-a": identity.public.public_key, "cortex-b": other.public.public_key}
    signed = SignedChange(kind="memory.delete", home="cortex-a", object_id=str(memory_id),
                          author="dev:owner", signed_at=change.signed_at, origin="cortex-a",
                          revision=3)
    verified = check_origin(signed, change.signature, keys)
    assert not isinstance(verified, str) and verified.key.agent_id == "cortex-a"
    assert check_origin(dataclasses.replace(signed, revision=4), change.signature,
                        keys) == "bad_signature"
    assert check_origin(dataclasses.replace(signed, origin="cortex-b"), change.signature,
                        keys) == "not_origin_object"
    assert check_origin(dataclasses.replace(signed, kind="memory.store"), change.signature,
                        keys) == "origin_signature_not_allowed"
    assert check_origin(signed, change.signature, {}) == "unknown_origin"
    assert check_origin(signed, None, keys) == "unsigned"
    store = memory_change("cortex-a", "memory.store", {**payload, "namespace": "n",
                                                       "title": "", "content": "c",
                                                       "tags": [], "metadata": {}}, None, AT)
    assert origin_signed(identity, store) == store  # a write keeps its agent's signature


def test_signer_is_on_the_wire_only_for_origin_signed_changes() -> None:
    """A receiver older than ADR 0138 forbids unknown fields: an agent-signed batch must not
    carry ``signer`` (the default), so only an origin-signed delete needs the newer peer."""
    identity = generate_key("cortex-a")  # type: ignore[arg-type]
    memory_id = uuid.uuid4()
    payload = {"id": str(memory_id), "revision": 1, "author": "dev:owner", "namespace": "n",
               "title": "", "content": "c", "tags": [], "metadata": {}}
    wire = {"expires_at": 1, "correlation_id": str(uuid.uuid4())}
    stored = {**memory_change("cortex-a", "memory.store", payload, None, AT), "seq": 1, **wire}
    deleted = {**origin_signed(identity, memory_change(
        "cortex-a", "memory.delete", {**payload, "revision": 2}, None, AT)), "seq": 2, **wire}
    body = json.loads(wire_body([stored, deleted]))
    assert "signer" not in body["changes"][0]
    assert body["changes"][1]["signer"] == "origin"
    assert [c.signer for c in ChangeBatch.model_validate(body).changes] == ["agent", "origin"]


def test_link_change_names_its_ends_at_home() -> None:
    link = LinkRow(uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), "related_to", AT, None, None,
                   "dev:writer", b"\x02" * 64, AT, "team/a", "team/b")
    fields = link_change("cortex-a", "link.create", link, AT)
    change = FederatedChange.model_validate({
        **fields, "seq": 1, "expires_at": 1, "correlation_id": str(uuid.uuid4())})
    assert change.link is not None and change.link.src_home == "cortex-a"
    assert change.signature is not None


class _Loop:
    def __init__(self) -> None:
        self.woken = 0

    def wake(self) -> None:
        self.woken += 1


async def _never(*_: object) -> list[Ack]:
    raise AssertionError("not called")


def test_new_events_wake_idle_senders_and_a_peers_batch_one_backing_off() -> None:
    sender = FederationSender(None, ["b", "c"], _never, _never, SendSettings())  # type: ignore[arg-type]
    idle, backing_off = _Loop(), _Loop()
    sender._peers["b"].loop = idle  # type: ignore[assignment]
    sender._peers["c"].loop = backing_off  # type: ignore[assignment]
    sender._peers["c"].attempts = 3
    sender.kick()
    assert (idle.woken, backing_off.woken) == (1, 0)  # the backoff is kept
    sender.heard_from("c")
    sender.heard_from("b")
    sender.heard_from("unknown")
    assert (idle.woken, backing_off.woken) == (1, 1)  # c is up again: retry now


class _Db:
    """Connections that are never used: the store calls are replaced."""

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[None]:
        yield None

    transaction = connection


async def test_a_batch_refused_as_too_large_is_halved(monkeypatch: pytest.MonkeyPatch) -> None:
    from attested_cortex.service.workers import federation_sending as module

    held = [Stored(seq, "post_store", f"memory:{seq}", "team/a", {}, AT) for seq in range(1, 9)]
    moved: list[int] = []

    async def after(_: object, cursor: int, limit: int) -> list[Stored]:
        return [e for e in held if e.seq > cursor][:limit]

    async def advance(_: object, __: str, to: int, ___: int) -> None:
        moved.append(to)

    async def nothing(*_: object) -> None:
        return None

    async def present(_: object) -> bool:
        return True

    async def cursor(*_: object) -> int:
        return 0

    monkeypatch.setattr(module.outbox, "after", after)

    async def bounds(_: object) -> tuple[int, int]:
        return 0, held[-1].seq

    monkeypatch.setattr(module.outbox, "bounds", bounds)
    monkeypatch.setattr(module.rows, "advance", advance)
    monkeypatch.setattr(module.rows, "failed", nothing)
    monkeypatch.setattr(module.rows, "present", present)
    monkeypatch.setattr(module.rows, "cursor", cursor)

    async def encode(_: object, __: str, events: list[Stored]) -> list[Outgoing]:
        return [Outgoing(e.seq, {}) for e in events]

    sizes: list[int] = []

    async def transport(_: str, changes: list[dict[str, object]]) -> list[Ack]:
        sizes.append(len(changes))
        if len(changes) > 2:  # the peer takes at most 2 a batch
            raise NotReadyError("too many", code=BATCH_REFUSED)
        return [Ack(int(str(c["seq"])), True, "stored") for c in changes]

    sender = FederationSender(_Db(), ["b"], encode, transport,  # type: ignore[arg-type]
                              SendSettings(batch=8))
    for _ in range(6):
        await sender.send_once("b")
    assert sizes[:3] == [8, 4, 2]  # refused, refused, then sent
    assert moved[0] == 2 and 8 in moved  # nothing lost: the backlog drains


def test_correlation_ids_are_v4_and_the_same_in_every_replica() -> None:
    first = correlation_id("a", "b", 41, 0)
    assert first.version == 4 and first == correlation_id("a", "b", 41, 0)
    others = {correlation_id("a", "b", 41, 1), correlation_id("a", "c", 41, 0),
              correlation_id("a", "b", 42, 0), correlation_id("x", "b", 41, 0)}
    assert first not in others and len(others) == 4
    FederatedChange.model_validate({  # the receiver's validator takes it
        "correlation_id": str(first), "seq": 41, "origin": "a", "revision": 1,
        "kind": "memory.delete", "home": "a", "object_id": str(uuid.uuid4()),
        "author": "dev:w", "signed_at": 0, "expires_at": 0})
