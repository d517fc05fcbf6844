"""The signed_events chain against a real PostgreSQL: append, verify, tampering, privileges."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime

import cbor2
import psycopg
import pytest

from attested_cortex.attest.auditing import append_event, verify_chain
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.signing import sign
from attested_cortex.errors import ConflictError, InvalidInputError
from attested_cortex.store.events import statement_recorded
from attested_cortex.types import AgentId
from tests.attest.chainhelp import append_many, keyring_of, verify
from tests.support.postgres import Database

AGENT = AgentId("k8s:team-a/planner")


async def test_empty_chain_verifies(chain_db: Database) -> None:
    report = await verify(chain_db.app_dsn)
    assert (report.ok, report.events, report.first_bad_sequence) == (True, 0, None)


async def test_appended_events_verify_with_and_without_keys(chain_db: Database) -> None:
    key = generate_key(AGENT)
    written = await append_many(chain_db.app_dsn, key, 10)
    assert [e.sequence for e in written] == list(range(1, 11))
    plain = await verify(chain_db.app_dsn)
    keyed = await verify(chain_db.app_dsn, keyring_of(key))
    assert plain.ok and plain.events == 10 and plain.head_hash == written[-1].hash.hex()
    assert keyed.ok and keyed.signatures_checked == 10 and keyed.unverified == 0
    stranger = await verify(chain_db.app_dsn, keyring_of(generate_key(AgentId("other"))))
    assert stranger.ok and stranger.unverified == 10


async def test_hash_input_is_exactly_the_documented_cbor_map(chain_db: Database) -> None:
    """Recompute every hash with cbor2 from docs/attestation.md's definition."""
    key = generate_key(AGENT)
    written = await append_many(chain_db.app_dsn, key, 3)
    prev = bytes(32)
    for event in written:
        micros = (event.created_at - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()
        document = {
            "v": 1, "sequence": event.sequence, "agent_id": AGENT, "prev_hash": prev,
            "created_at": round(micros * 1_000_000), "event_type": "link.created",
            "signature": event.signature, "payload_hash": hashlib.sha256(event.payload).digest(),
            "key_fingerprint": key.public.fingerprint,
        }
        assert hashlib.sha256(cbor2.dumps(document, canonical=True)).digest() == event.hash
        assert event.prev_hash == prev
        prev = event.hash


async def test_external_signature_is_recorded_as_given(chain_db: Database) -> None:
    key = generate_key(AGENT)
    payload = b"\xa1\x61\x61\x01"
    connecting = psycopg.AsyncConnection.connect(chain_db.app_dsn)
    async with await connecting as conn, conn.transaction():
        event = await append_event(
            conn, agent_id=AGENT, event_type="link.created", payload=payload,
            signature=sign(key, payload), key_fingerprint=key.public.fingerprint,
        )
    assert event.payload == payload
    assert (await verify(chain_db.app_dsn, keyring_of(key))).signatures_checked == 1


async def test_a_rolled_back_append_leaves_no_gap(chain_db: Database) -> None:
    key = generate_key(AGENT)
    await append_many(chain_db.app_dsn, key, 2)
    async with await psycopg.AsyncConnection.connect(chain_db.app_dsn) as conn:
        with pytest.raises(RuntimeError):
            async with conn.transaction():
                await append_event(conn, agent_id=AGENT, event_type="link.created",
                                   payload={"n": "rolled back"}, signer=key)
                raise RuntimeError("the write failed after the append")
    written = await append_many(chain_db.app_dsn, key, 1, tag="after")
    assert written[0].sequence == 3
    assert (await verify(chain_db.app_dsn)).ok


async def test_the_same_signed_statement_is_recorded_once(chain_db: Database) -> None:
    key = generate_key(AGENT)
    first = (await append_many(chain_db.app_dsn, key, 1))[0]
    with pytest.raises(ConflictError) as info:
        await append_many(chain_db.app_dsn, key, 1)
    assert (info.value.code, info.value.http_status) == ("replay", 409)
    async with await psycopg.AsyncConnection.connect(chain_db.app_dsn) as conn:
        assert await statement_recorded(
            conn, event_type="link.created", payload_hash=first.payload_hash
        )
        assert not await statement_recorded(
            conn, event_type="link.invalidated", payload_hash=first.payload_hash
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "signer or a 64-byte signature"),
        ({"signature": b"\x00" * 64}, "signer or a 64-byte signature"),
        ({"signature": b"\x00" * 63, "key_fingerprint": "0" * 64}, "64-byte"),
        ({"signer": "other-agent", "signature": b"\x00" * 64}, "either a signer"),
        ({"signer": "other-agent"}, "either a signer"),
    ],
)
async def test_append_refuses_events_without_a_proper_signature(
    chain_db: Database, kwargs: dict[str, object], message: str
) -> None:
    if "signer" in kwargs:
        kwargs["signer"] = generate_key(AgentId("someone-else"))
    async with await psycopg.AsyncConnection.connect(chain_db.app_dsn) as conn:
        with pytest.raises(InvalidInputError, match=message):
            await append_event(conn, agent_id=AGENT, event_type="link.created",
                               payload={}, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("event_type", ["", "Link Created", "x" * 65, "1link"])
async def test_append_refuses_bad_event_types(chain_db: Database, event_type: str) -> None:
    async with await psycopg.AsyncConnection.connect(chain_db.app_dsn) as conn:
        with pytest.raises(InvalidInputError):
            await append_event(conn, agent_id=AGENT, event_type=event_type, payload={},
                               signer=generate_key(AGENT))


async def test_many_parallel_writers_never_fork_the_chain(chain_db: Database) -> None:
    writers = [generate_key(AgentId(f"agent-{i}")) for i in range(20)]
    await asyncio.gather(*(append_many(chain_db.app_dsn, k, 25, tag=k.agent_id) for k in writers))
    report = await verify(chain_db.app_dsn, keyring_of(*writers))
    assert (report.ok, report.events, report.signatures_checked) == (True, 500, 500)
    async with await psycopg.AsyncConnection.connect(chain_db.dsn) as conn:
        cur = await conn.execute("SELECT min(sequence), max(sequence), count(*) FROM signed_events")
        assert await cur.fetchone() == (1, 500, 500)


def test_hash_input_is_the_generic_deterministic_encoding() -> None:
    from attested_cortex.attest import cbor
    from attested_cortex.attest.chain import Statement, hash_input

    statement = Statement(AGENT, "link.created", b"p", b"s" * 64, "f" * 64)
    moment = datetime(2026, 11, 29, 23, 0, 0, 123456, tzinfo=UTC)
    expected = cbor.encode({
        "v": 1, "sequence": 70000, "agent_id": AGENT, "prev_hash": b"h" * 32,
        "created_at": 1795993200123456, "event_type": "link.created", "signature": b"s" * 64,
        "payload_hash": b"q" * 32, "key_fingerprint": "f" * 64,
    })
    built = hash_input(sequence=70000, prev_hash=b"h" * 32, created_at=moment,
                       statement=statement, payload_hash=b"q" * 32)
    assert built == expected == cbor2.dumps(cbor2.loads(expected), canonical=True)


async def test_works_on_connections_with_dict_rows(chain_db: Database) -> None:
    """The server's pool hands out dict-row connections; the chain must not care."""
    from psycopg.rows import dict_row

    key = generate_key(AGENT)
    connecting = psycopg.AsyncConnection.connect(chain_db.app_dsn, row_factory=dict_row)
    async with await connecting as conn:
        for index in range(3):
            async with conn.transaction():
                await append_event(conn, agent_id=AGENT, event_type="link.created",
                                   payload={"n": index}, signer=key)
        report = await verify_chain(conn, keyring=keyring_of(key))
    assert (report.ok, report.events, report.signatures_checked) == (True, 3, 3)
