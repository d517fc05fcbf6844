"""Tampering with signed_events behind the server's back, and the database refusing changes.

Tampering runs as the superuser with the table's triggers disabled, the strongest position
short of rewriting the verifier; each kind of change must be reported at the sequence it
first disturbs.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pg

from attested_cortex.attest import cbor
from attested_cortex.attest.keys import generate_key
from attested_cortex.attest.signing import sign
from attested_cortex.types import AgentId
from tests.attest.chainhelp import append_many, keyring_of, rehash, tamper, verify
from tests.support.postgres import Database

AGENT = AgentId("k8s:team-a/planner")
SET_PAYLOAD = "UPDATE signed_events SET payload = %s WHERE sequence = %s"


@pytest.fixture
async def ten_events(chain_db: Database) -> Database:
    await append_many(chain_db.app_dsn, KEY, 10)
    return chain_db


KEY = generate_key(AGENT)


async def test_changed_payload_is_detected_at_its_sequence(ten_events: Database) -> None:
    await tamper(ten_events.dsn, (SET_PAYLOAD, (cbor.encode({"n": 99}), 4)))
    report = await verify(ten_events.dsn)
    assert (report.ok, report.first_bad_sequence, report.reason) == (
        False, 4, "payload_hash_mismatch",
    )
    assert report.events == 3


async def test_changed_payload_with_its_hash_is_detected(ten_events: Database) -> None:
    forged = cbor.encode({"n": 99})
    await tamper(
        ten_events.dsn,
        ("UPDATE signed_events SET payload = %s, payload_hash = sha256(%s) WHERE sequence = 4",
         (forged, forged)),
    )
    report = await verify(ten_events.dsn)
    assert (report.first_bad_sequence, report.reason) == (4, "hash_mismatch")


async def test_a_fully_rehashed_rewrite_is_caught_by_the_signature(ten_events: Database) -> None:
    await tamper(ten_events.dsn, (SET_PAYLOAD, (cbor.encode({"n": 99}), 4)))
    await rehash(ten_events.dsn)
    assert (await verify(ten_events.dsn)).ok  # the hash chain alone cannot see it
    report = await verify(ten_events.dsn, keyring_of(KEY))
    assert (report.first_bad_sequence, report.reason) == (4, "bad_signature")


async def test_deleted_row_is_detected_at_its_sequence(ten_events: Database) -> None:
    await tamper(ten_events.dsn, ("DELETE FROM signed_events WHERE sequence = %s", (6,)))
    report = await verify(ten_events.dsn)
    assert (report.first_bad_sequence, report.reason) == (6, "missing_event")


async def test_swapped_rows_are_detected_at_the_first_one(ten_events: Database) -> None:
    move = "UPDATE signed_events SET sequence = %s WHERE sequence = %s"
    await tamper(ten_events.dsn, (move, (1003, 3)), (move, (3, 7)), (move, (7, 1003)))
    report = await verify(ten_events.dsn)
    assert (report.first_bad_sequence, report.reason) == (3, "prev_hash_mismatch")


async def test_inserted_row_is_detected_at_its_sequence(ten_events: Database) -> None:
    impostor = generate_key(AGENT)
    payload = cbor.encode({"n": "inserted"})
    shift = "UPDATE signed_events SET sequence = sequence + 1000 WHERE sequence >= 6"
    back = "UPDATE signed_events SET sequence = sequence - 999 WHERE sequence > 1000"
    insert = (
        "INSERT INTO signed_events SELECT 6, agent_id, event_type, %s, sha256(%s), %s, "
        "key_fingerprint, hash, hash, created_at FROM signed_events WHERE sequence = 5"
    )
    await tamper(
        ten_events.dsn, (shift, ()), (back, ()),
        (insert, (payload, payload, sign(impostor, payload))),
    )
    report = await verify(ten_events.dsn)
    assert (report.first_bad_sequence, report.reason) == (6, "hash_mismatch")
    await rehash(ten_events.dsn)
    keyed = await verify(ten_events.dsn, keyring_of(KEY))
    assert (keyed.first_bad_sequence, keyed.reason) == (6, "bad_signature")


async def test_forged_signature_is_detected_at_its_sequence(ten_events: Database) -> None:
    forger = generate_key(AGENT)
    async with await psycopg.AsyncConnection.connect(ten_events.dsn) as conn:
        cur = await conn.execute("SELECT payload FROM signed_events WHERE sequence = 5")
        row = await cur.fetchone()
    assert row is not None
    forged = sign(forger, row[0])
    await tamper(
        ten_events.dsn, ("UPDATE signed_events SET signature = %s WHERE sequence = 5", (forged,))
    )
    assert (await verify(ten_events.dsn)).first_bad_sequence == 5
    await rehash(ten_events.dsn)
    report = await verify(ten_events.dsn, keyring_of(KEY))
    assert (report.first_bad_sequence, report.reason) == (5, "bad_signature")


async def test_an_event_under_an_untrusted_key_of_a_known_agent_fails(
    ten_events: Database,
) -> None:
    other = generate_key(AGENT)
    await tamper(
        ten_events.dsn,
        ("UPDATE signed_events SET key_fingerprint = %s WHERE sequence = 2",
         (other.public.fingerprint,)),
    )
    await rehash(ten_events.dsn)
    report = await verify(ten_events.dsn, keyring_of(KEY))
    assert (report.first_bad_sequence, report.reason) == (2, "unknown_key_for_agent")


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE signed_events SET agent_id = 'someone' WHERE sequence = 1",
        "DELETE FROM signed_events WHERE sequence = 1",
        "TRUNCATE signed_events",
    ],
)
async def test_the_app_role_may_not_change_or_remove_events(
    ten_events: Database, statement: str
) -> None:
    async with await psycopg.AsyncConnection.connect(ten_events.app_dsn) as conn:
        with pytest.raises(pg.InsufficientPrivilege):
            await conn.execute(statement)


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE signed_events SET agent_id = 'someone' WHERE sequence = 1",
        "DELETE FROM signed_events WHERE sequence = 1",
        # CASCADE: a plain TRUNCATE is refused earlier, by the MACs' foreign key (0014)
        "TRUNCATE signed_events CASCADE",
        "TRUNCATE signed_event_macs",
    ],
)
@pytest.mark.parametrize("replica", [False, True], ids=["origin", "replica-role"])
async def test_the_trigger_refuses_even_the_owner(
    ten_events: Database, statement: str, replica: bool
) -> None:
    async with await psycopg.AsyncConnection.connect(ten_events.dsn) as conn:
        if replica:
            await conn.execute("SET session_replication_role = replica")
        with pytest.raises(pg.InsufficientPrivilege, match="append-only"):
            await conn.execute(statement)
    assert (await verify(ten_events.dsn)).events == 10


@pytest.mark.parametrize("dsn", ["dsn", "app_dsn"], ids=["owner", "app-role"])
async def test_a_client_supplied_hash_and_link_are_replaced_by_the_database(
    ten_events: Database, dsn: str,
) -> None:
    # Issue 13: the server role could append an event with a garbage hash at the head and
    # break the chain for every later event. Now the database computes sequence, prev_hash,
    # payload_hash, created_at and hash itself; what the client sends for them is ignored.
    async with await psycopg.AsyncConnection.connect(getattr(ten_events, dsn)) as conn:
        cur = await conn.execute(
            "INSERT INTO signed_events SELECT 11, 'intruder', 'garbage.event', '\\x00', "
            "'\\x0101010101010101010101010101010101010101010101010101010101010101', NULL, "
            "NULL, hash, '\\x0202020202020202020202020202020202020202020202020202020202020202', "
            "'1999-01-01T00:00:00Z' FROM signed_events WHERE sequence = 10 "
            "RETURNING sequence, hash"
        )
        stored = await cur.fetchone()
        await conn.commit()
    assert stored is not None and stored[0] == 11 and bytes(stored[1]) != b"\x02" * 32
    report = await verify(ten_events.dsn, keyring_of(KEY))
    assert (report.ok, report.events) == (True, 11)  # an unsigned event, in a valid chain
    await append_many(ten_events.app_dsn, KEY, 2, tag="after")  # later appends still extend it
    assert (await verify(ten_events.dsn, keyring_of(KEY))).events == 13


async def test_the_app_role_holds_only_select_and_insert(ten_events: Database) -> None:
    async with await psycopg.AsyncConnection.connect(ten_events.dsn) as conn:
        cur = await conn.execute(
            "SELECT privilege_type FROM information_schema.role_table_grants "
            "WHERE table_name = 'signed_events' AND grantee = 'cortex_app' ORDER BY 1"
        )
        assert [r[0] for r in await cur.fetchall()] == ["INSERT", "SELECT"]
        cur = await conn.execute(
            "SELECT count(*) FROM information_schema.role_table_grants "
            "WHERE table_name = 'signed_events' AND grantee = 'PUBLIC'"
        )
        assert await cur.fetchone() == (0,)


@pytest.mark.parametrize("batch", [4, 5000])
async def test_the_lowest_of_several_forged_signatures_is_reported(
    ten_events: Database, batch: int
) -> None:
    from attested_cortex.attest.auditing import verify_chain

    forged = sign(generate_key(AGENT), b"something else")
    update = "UPDATE signed_events SET signature = %s WHERE sequence = %s"
    await tamper(ten_events.dsn, (update, (forged, 9)), (update, (forged, 7)),
                 (update, (forged, 6)))
    await rehash(ten_events.dsn)
    async with await psycopg.AsyncConnection.connect(ten_events.dsn) as conn:
        report = await verify_chain(conn, keyring=keyring_of(KEY), batch=batch)
    assert (report.first_bad_sequence, report.reason, report.events) == (6, "bad_signature", 5)


@pytest.mark.parametrize("head", [0, 23, 255, 65535, 4294967295, 4294967296])
@pytest.mark.parametrize("agent_id", ["a", "x" * 23, "y" * 24, "z" * 256, "é" * 1024])
async def test_the_database_hash_is_the_documented_one(
    chain_db: Database, head: int, agent_id: str,
) -> None:
    # Every CBOR head size the trigger writes: sequences and texts on both sides of each
    # boundary (the trigger spells the encoding out in SQL; attest/chain.py is the spec).
    from attested_cortex.attest.auditing import record_event
    from attested_cortex.attest.chain import Statement, event_hash

    prev = bytes(range(32))
    if head:
        await tamper(chain_db.dsn, (
            "INSERT INTO signed_events VALUES (%s, 'seed', 'seed.event', '\\x00', "
            "sha256('\\x00'::bytea), NULL, NULL, %s, %s, now())", (head, prev, prev)))
    async with await psycopg.AsyncConnection.connect(chain_db.app_dsn) as conn:
        event = await record_event(conn, agent_id=agent_id, event_type="memory.stored",
                                   payload={"n": head})
        await conn.commit()
    assert event.sequence == head + 1
    expected_prev = prev if head else bytes(32)
    statement = Statement(agent_id, "memory.stored", event.payload, None, None)
    assert event.prev_hash == expected_prev
    assert event.hash == event_hash(sequence=head + 1, prev_hash=expected_prev,
                                    created_at=event.created_at, statement=statement)
    signed = await append_many(chain_db.app_dsn, KEY, 1, tag=agent_id)
    assert signed[0].hash == event_hash(
        sequence=head + 2, prev_hash=event.hash, created_at=signed[0].created_at,
        statement=Statement(KEY.agent_id, "link.created", signed[0].payload,
                            signed[0].signature, signed[0].key_fingerprint))
