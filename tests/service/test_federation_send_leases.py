"""One replica of a cortex sends to each peer (ADR 0139), on a real PostgreSQL: two senders
over one database (two replicas) with the same peer; only the lease holder sends, the other
sends nothing while it holds, and takes over, from where the holder left the cursor, when
the holder's session dies (terminated, as a killed replica's is). Under a second."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

from attested_cortex.service.workers.federation_sending import (
    Ack,
    FederationSender,
    Outgoing,
    SendSettings,
)
from attested_cortex.store import outbox
from attested_cortex.store.database import Conn, Database
from attested_cortex.store.leases import FEDERATION_CLASS
from attested_cortex.store.outbox import OutboxEvent, Stored

PEER = "team-b"


async def encode(conn: Conn, peer: str, events: Sequence[Stored]) -> list[Outgoing]:
    return [Outgoing(e.seq, {"kind": e.event}) for e in events]


class Recorder:
    """A peer that accepts everything and remembers the seqs it was sent."""

    def __init__(self) -> None:
        self.seqs: list[int] = []

    async def __call__(self, peer: str, changes: list[dict[str, Any]]) -> list[Ack]:
        self.seqs.extend(c["seq"] for c in changes)
        return [Ack(c["seq"], True, "stored") for c in changes]


async def write(db: Database, count: int) -> None:
    async with db.transaction() as conn:
        await outbox.append(conn, [OutboxEvent("post_store", f"k{i}", "team/notes", {})
                                   for i in range(count)])


def terminate_holder(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND classid = %s AND objid::bigint = (hashtext(%s)::bigint & 4294967295) "
            "AND objsubid = 2 AND granted", (FEDERATION_CLASS, PEER))


async def test_one_replica_sends_to_a_peer_and_another_takes_over(
        migrated_pg15_dsn: str) -> None:
    db = await Database.open(migrated_pg15_dsn, min_size=1, max_size=2)
    settings = SendSettings(poll_s=0.0)
    sent = {"one": Recorder(), "two": Recorder()}
    one, two = (FederationSender(db, [PEER], encode, sent[n], settings, origin="a")
                for n in ("one", "two"))
    one.leases.bind(migrated_pg15_dsn)
    two.leases.bind(migrated_pg15_dsn)
    try:
        await write(db, 3)
        await one.send_once(PEER)
        await two.send_once(PEER)  # one holds the peer's lease: two sends nothing
        await write(db, 2)
        await two.send_once(PEER)
        await one.send_once(PEER)
        assert len(sent["one"].seqs) == 5 and sent["two"].seqs == []
        terminate_holder(migrated_pg15_dsn)  # one's replica dies
        await write(db, 1)
        await two.send_once(PEER)  # takes over at the cursor one left
        await one.send_once(PEER)  # notices its session is gone: sends nothing
        assert len(sent["two"].seqs) == 1 and len(sent["one"].seqs) == 5
        assert sent["two"].seqs[0] > max(sent["one"].seqs)
    finally:
        await one.aclose()
        await two.aclose()
        await db.close()
