"""Helpers shared by the audit-chain tests: writing events and tampering as a superuser."""

from __future__ import annotations

import hashlib

import psycopg

from attested_cortex.attest.auditing import ChainReport, append_event, verify_chain
from attested_cortex.attest.chain import Statement, event_hash
from attested_cortex.attest.keyring import KeyRevision, Keyring, build_keyring
from attested_cortex.attest.keys import AgentKey
from attested_cortex.store.events import GENESIS_HASH, EventRow, stream_events

TRIGGERS = (
    "signed_events_no_update_delete", "signed_events_no_truncate", "signed_events_extends_head"
)


async def append_many(dsn: str, key: AgentKey, count: int, *, tag: str = "") -> list[EventRow]:
    """Append ``count`` events signed by ``key``, one transaction each."""
    written = []
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        for index in range(count):
            async with conn.transaction():
                written.append(
                    await append_event(
                        conn, agent_id=key.agent_id, event_type="link.created",
                        payload={"n": index, "tag": tag}, signer=key,
                    )
                )
    return written


async def verify(dsn: str, keyring: Keyring | None = None) -> ChainReport:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return await verify_chain(conn, keyring=keyring, batch=4)


def keyring_of(*keys: AgentKey) -> Keyring:
    return build_keyring(KeyRevision(k.agent_id, k.public.public_key) for k in keys)


async def tamper(dsn: str, *statements: tuple[str, tuple[object, ...]]) -> None:
    """Run statements as the superuser with the table's triggers disabled, then re-enable."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute("ALTER TABLE signed_events DISABLE TRIGGER USER")
        try:
            for sql, params in statements:
                await conn.execute(sql, params)
        finally:
            for trigger in TRIGGERS:
                await conn.execute(f"ALTER TABLE signed_events ENABLE ALWAYS TRIGGER {trigger}")


async def rehash(dsn: str) -> None:
    """Recompute every prev_hash and hash, as an attacker covering a rewrite would."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        rows = [row for batch in [b async for b in stream_events(conn)] for row in batch]
    prev, updates = GENESIS_HASH, []
    for row in rows:
        statement = Statement(
            row.agent_id, row.event_type, row.payload, row.signature, row.key_fingerprint
        )
        digest = event_hash(
            sequence=row.sequence, prev_hash=prev, created_at=row.created_at, statement=statement
        )
        updates.append(
            (
                "UPDATE signed_events SET prev_hash = %s, hash = %s, payload_hash = %s "
                "WHERE sequence = %s",
                (prev, digest, hashlib.sha256(row.payload).digest(), row.sequence),
            )
        )
        prev = digest
    await tamper(dsn, *updates)
