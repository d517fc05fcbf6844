"""SQL for the signed_events audit chain: append, look up, stream. No crypto here.

Called only by :mod:`attested_cortex.attest.auditing`, which computes hashes and signatures
(the store layer sits below attest and must not import it). Every function runs inside the
caller's connection; psycopg errors are translated here and never escape.

Appends serialize on a transaction-scoped advisory lock that the BEFORE INSERT trigger
(migration 0006) takes itself; the caller's COMMIT or ROLLBACK releases it, so keep the append
the last statement of the write transaction. The trigger also computes the event's sequence,
prev_hash, payload_hash, created_at and hash: :func:`append` sends only what the writer
states (agent, type, payload, signature, key) and reads back what the database made of it.

The keyed chain (migration 0014, ADR 0051): a connection of a database opened with a
:class:`ChainSeal` (:func:`bind_seal`, done by :meth:`.database.Database.open`) seals every
event it appends, whatever the path: after the insert it has the event's hash and the MAC of
the event before (``prev_mac``, which the trigger reads under the chain lock), asks the seal
for the MAC and inserts it into ``signed_event_macs`` while the lock is still held. The seal
is a callable from ``attest`` (the key never reaches this layer's SQL, nor the database).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol
from weakref import WeakKeyDictionary

import psycopg
from psycopg import errors as pg

from attested_cortex.errors import ConflictError, CortexError, NotReadyError
from attested_cortex.store.errors import translate, translating

#: The chain lock's advisory key ("atcxchai"); distinct from the migrator's.
CHAIN_LOCK_KEY = 0x6174_6378_6368_6169
GENESIS_HASH = bytes(32)
#: The MAC an event chains from when the event before it has none (or it is the first).
GENESIS_MAC = bytes(32)
STATEMENT_INDEX = "signed_events_statement_idx"
_COLUMNS = (
    "sequence, agent_id, event_type, payload, payload_hash, signature, key_fingerprint, "
    "prev_hash, hash, created_at"
)


@dataclass(frozen=True, slots=True)
class EventRow:
    """One stored audit event, column for column."""

    sequence: int
    agent_id: str
    event_type: str
    payload: bytes
    payload_hash: bytes
    signature: bytes | None
    key_fingerprint: str | None
    prev_hash: bytes
    hash: bytes
    created_at: datetime
    #: The keyed chain (migration 0014): this event's MAC row, when it has one.
    mac: bytes | None = None
    mac_version: int | None = None


class ChainSeal(Protocol):
    """What computes the keyed chain's MACs (:class:`attested_cortex.attest.keyedchain.Seal`)."""

    @property
    def version(self) -> int:
        """The master key version whose ``audit`` subkey this seal uses."""
        ...

    def __call__(self, prev_mac: bytes, event_hash: bytes) -> bytes:
        """HMAC-SHA256(subkey, prev_mac || event_hash)."""
        ...

    def verifies(self, prev_mac: bytes, event_hash: bytes, mac: bytes, version: int) -> bool:
        """Whether ``mac`` is the MAC of ``event_hash`` after ``prev_mac`` under the
        ``audit`` subkey of ``version`` (False for a version the key ring does not hold)."""
        ...


_SEALS: WeakKeyDictionary[psycopg.AsyncConnection[Any], ChainSeal] = WeakKeyDictionary()


def bind_seal(conn: psycopg.AsyncConnection[Any], seal: ChainSeal) -> None:
    """Seal every event ``conn`` appends from now on (for the connection's life)."""
    _SEALS[conn] = seal


def sealed(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether appends on ``conn`` are sealed."""
    return conn in _SEALS


#: What :func:`seal_appended` needs of each appended event: sequence, hash, prev_mac.
Appended = tuple[int, bytes, bytes | None]
#: ``RETURNING`` of an append that is to be sealed.
SEAL_RETURNING = "sequence, hash, prev_mac"


async def seal_appended(conn: psycopg.AsyncConnection[Any], appended: Sequence[Appended]
                        ) -> None:
    """Insert the MACs of events this transaction just appended (contiguous: it holds the
    chain lock), in sequence order: the first chains from its ``prev_mac``, each next one
    from the MAC before it. Nothing without a seal on ``conn``."""
    seal = _SEALS.get(conn)
    if seal is None or not appended:
        return
    ordered = sorted((int(s), bytes(h), None if p is None else bytes(p)) for s, h, p in appended)
    prev = ordered[0][2] or GENESIS_MAC
    sequences, macs = [], []
    for sequence, digest, _ in ordered:
        prev = seal(prev, digest)
        sequences.append(sequence)
        macs.append(prev)
    with translating():
        await conn.execute(
            "INSERT INTO signed_event_macs (sequence, key_version, mac) SELECT s, %s, m "
            "FROM unnest(%s::bigint[], %s::bytea[]) AS u(s, m)",
            (seal.version, sequences, macs))


@dataclass(frozen=True, slots=True)
class PendingEvent:
    """An event stated before it is appended (:func:`append_many`: the sweeper's batches)."""

    agent_id: str
    event_type: str
    payload: bytes
    signature: bytes | None = None
    key_fingerprint: str | None = None

    def params(self) -> tuple[Any, ...]:
        """The values of :data:`APPEND_VALUES`, in order."""
        return (self.agent_id, self.event_type, self.payload, self.signature,
                self.key_fingerprint)


#: ``INSERT`` of a :class:`PendingEvent` (5 parameters); the trigger fills the chain fields.
APPEND_VALUES = (
    "INSERT INTO signed_events (agent_id, event_type, payload, signature, key_fingerprint) "
    "VALUES (%s, %s, %s, %s, %s)"
)


async def append(
    conn: psycopg.AsyncConnection[Any], *, agent_id: str, event_type: str, payload: bytes,
    signature: bytes | None, key_fingerprint: str | None,
) -> EventRow:
    """Append a statement as the next event; the database places and hashes it. A statement
    already recorded is a replay (ConflictError)."""
    try:
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            f"{APPEND_VALUES} RETURNING {_COLUMNS}, prev_mac",
            (agent_id, event_type, payload, signature, key_fingerprint),
        )
        row = await cur.fetchone()
    except psycopg.Error as exc:
        domain = _insert_error(exc, event_type=event_type)
        if domain is None:
            raise
        raise domain from exc
    assert row is not None
    event = _row(row[:-1])
    await seal_appended(conn, [(event.sequence, event.hash, row[-1])])
    return event


async def append_many(conn: psycopg.AsyncConnection[Any], pending: Sequence[PendingEvent]
                      ) -> None:
    """Append events in order, pipelined (one round trip for the batch; the trigger places
    and hashes each in turn)."""
    if not pending:
        return
    params = [event.params() for event in pending]
    with translating_events(pending[0]):
        async with conn.cursor(row_factory=psycopg.rows.tuple_row) as cur:
            if not sealed(conn):
                await cur.executemany(APPEND_VALUES, params)
                return
            await cur.executemany(f"{APPEND_VALUES} RETURNING {SEAL_RETURNING}", params,
                                  returning=True)
            appended: list[Appended] = []
            while True:
                appended.extend(await cur.fetchall())
                if not cur.nextset():
                    break
    await seal_appended(conn, appended)


async def append_rows(conn: psycopg.AsyncConnection[Any], pending: Sequence[PendingEvent]
                      ) -> None:
    """Append events in order in one statement (a batch's records: one round trip and one
    statement to plan, however many; the trigger places and hashes each row in turn, and
    each sees the rows before it, so the chain is the same as one append per event). The
    payloads and signatures go as binary parameters: psycopg's text form of a ``bytea[]``
    escapes every byte in Python (a fifth of a 1,000-memory batch's server time)."""
    if not pending:
        return
    columns = list(zip(*(event.params() for event in pending), strict=True))
    with translating_events(pending[0]):
        cur = await conn.cursor(row_factory=psycopg.rows.tuple_row).execute(
            "INSERT INTO signed_events (agent_id, event_type, payload, signature, "
            "key_fingerprint) SELECT a, t, p, s, k FROM unnest(%s::text[], %s::text[], "
            "%b::bytea[], %b::bytea[], %s::text[]) WITH ORDINALITY AS e(a, t, p, s, k, n) "
            f"ORDER BY n RETURNING {SEAL_RETURNING}", [list(column) for column in columns])
        appended = await cur.fetchall()
    await seal_appended(conn, appended)


async def statement_recorded(
    conn: psycopg.AsyncConnection[Any], *, event_type: str, payload_hash: bytes
) -> bool:
    """Whether an event of this type with these payload bytes is already in the chain."""
    with translating():
        cur = await conn.execute(
            "SELECT 1 FROM signed_events WHERE event_type = %s AND payload_hash = %s",
            (event_type, payload_hash),
        )
        return await cur.fetchone() is not None


#: An event of the keyed chain with its own MAC row and the one of the event before it, and
#: whether it precedes every MAC row (appended before the cortex had its key).
_KEYED_EVENTS = (
    "SELECT e.payload_hash, e.hash, m.mac, m.key_version, p.mac AS prev_mac, "
    "e.sequence < coalesce((SELECT min(sequence) FROM signed_event_macs), "
    "9223372036854775807) AS before_key{more} FROM signed_events e "
    "LEFT JOIN signed_event_macs m ON m.sequence = e.sequence "
    "LEFT JOIN signed_event_macs p ON p.sequence = e.sequence - 1 ")
_KEYED_STATEMENTS = (_KEYED_EVENTS.format(more="")
                     + "WHERE e.event_type = ANY(%s) AND e.payload_hash = ANY(%s)")
_KEYED_SINCE = (_KEYED_EVENTS.format(more=", e.sequence, e.payload") + "WHERE e.agent_id = %s"
                " AND e.event_type = %s AND e.created_at >= %s AND e.sequence > %s"
                " ORDER BY e.sequence LIMIT %s")


async def recorded_statements(
    conn: psycopg.AsyncConnection[Any], *, event_types: Sequence[str],
    payload_hashes: Sequence[bytes],
) -> set[bytes]:
    """Which of ``payload_hashes`` the chain holds as an event of ``event_types``.

    On a sealed connection (the server holds the master key, ADR 0051) only an event the
    key vouches for counts (issue 37 item 12): one whose MAC row the key gives, or one
    appended before the first MAC row (a chain older than the key). An event appended with
    the database role alone (no MAC, or a MAC the key does not give) is no record, so a
    row changed together with a matching forged record is not taken as recorded by any
    worker (the re-sealer would seal the forgery and append a good MAC over it)."""
    seal = _SEALS.get(conn)
    with translating():
        if seal is None:
            cur = await conn.execute(
                "SELECT payload_hash FROM signed_events WHERE event_type = ANY(%s) "
                "AND payload_hash = ANY(%s)", (list(event_types), list(payload_hashes)))
            return {bytes(row["payload_hash"]) for row in await cur.fetchall()}
        cur = await conn.execute(_KEYED_STATEMENTS, (list(event_types), list(payload_hashes)))
        rows = await cur.fetchall()
    return {bytes(row["payload_hash"]) for row in rows if _vouched(seal, row)}


async def recorded_since(
    conn: psycopg.AsyncConnection[Any], *, agent_id: str, event_type: str,
    since: datetime, batch: int = 200,
) -> AsyncIterator[bytes]:
    """The payloads of the events of ``event_type`` that ``agent_id`` appended at or after
    ``since``, in chain order, read ``batch`` at a time through the agent's index (stop
    iterating once found); on a sealed connection only those the key vouches for, as
    :func:`recorded_statements`. For an op that finds the record of a row it is about to
    act on by who made the row and when."""
    seal = _SEALS.get(conn)
    after = 0
    while True:
        with translating():
            cur = await conn.execute(_KEYED_SINCE, (agent_id, event_type, since, after, batch))
            rows = await cur.fetchall()
        for row in rows:
            if seal is None or _vouched(seal, row):
                yield bytes(row["payload"])
        if len(rows) < batch:
            return
        after = int(rows[-1]["sequence"])


async def vouched_payload(conn: psycopg.AsyncConnection[Any], sequence: int) -> bytes | None:
    """The payload of the event at ``sequence``, or None when there is none or (on a sealed
    connection) the key does not vouch for it, as :func:`recorded_statements`."""
    seal = _SEALS.get(conn)
    with translating():
        cur = await conn.execute(_KEYED_EVENTS.format(more=", e.payload")
                                 + "WHERE e.sequence = %s", (sequence,))
        row = await cur.fetchone()
    if row is None or (seal is not None and not _vouched(seal, row)):
        return None
    return bytes(row["payload"])


def _vouched(seal: ChainSeal, row: dict[str, Any]) -> bool:
    """Whether the key vouches for this event: its MAC row verifies under the key, or it
    was appended before the first MAC row (a chain older than the key)."""
    mac = row["mac"]
    if mac is None:
        return bool(row["before_key"])
    prev = GENESIS_MAC if row["prev_mac"] is None else bytes(row["prev_mac"])
    return bool(seal.verifies(prev, bytes(row["hash"]), bytes(mac), int(row["key_version"])))


async def stream_events(
    conn: psycopg.AsyncConnection[Any], *, batch: int = 5000, with_macs: bool = False,
) -> AsyncGenerator[list[EventRow], None]:
    """Every event in sequence order, in batches, through a server-side cursor;
    ``with_macs``: with its MAC row (migration 0014; a schema before it is not read so).

    Opens its own transaction (a named cursor lives inside one). Events appended while the
    scan runs come after every row it reads, so they never disturb what it checks.
    """
    with translating():
        async with conn.transaction():
            cursor = conn.cursor(
                "signed_events_scan", row_factory=psycopg.rows.tuple_row, binary=True
            )
            async with cursor:
                await cursor.execute(
                    f"SELECT {_QUALIFIED}, m.mac, m.key_version FROM signed_events e "
                    "LEFT JOIN signed_event_macs m USING (sequence) ORDER BY e.sequence"
                    if with_macs else f"SELECT {_COLUMNS} FROM signed_events ORDER BY sequence")
                while rows := await cursor.fetchmany(batch):
                    yield [_row(r) for r in rows]


async def written_at(conn: psycopg.AsyncConnection[Any], sequence: int) -> datetime | None:
    """When event ``sequence`` was appended (None: no such event): the point in time a
    restored chain reaches, for the verifier's summary (cli/audit.py)."""
    with translating():
        cur = await conn.execute("SELECT created_at FROM signed_events WHERE sequence = %s",
                                 (sequence,))
        row = await cur.fetchone()
    if row is None:
        return None
    value = row["created_at"] if isinstance(row, dict) else row[0]
    return value if isinstance(value, datetime) else None


@contextmanager
def translating_events(event: PendingEvent | None) -> Iterator[None]:
    """Name the ways a statement carrying ``event`` fails in signed_events (replay, the
    role's privileges); other errors pass on to the caller's translation."""
    try:
        yield
    except psycopg.Error as exc:
        if event is None or exc.diag.table_name != "signed_events":
            raise
        domain = _insert_error(exc, event_type=event.event_type)
        if domain is None:
            raise
        raise domain from exc


def _insert_error(exc: psycopg.Error, *, event_type: str) -> CortexError | None:
    """Name the expected ways an append fails; None for a bug."""
    if isinstance(exc, pg.UniqueViolation) and exc.diag.constraint_name == STATEMENT_INDEX:
        return ConflictError(
            "this signed statement was already recorded (replay)",
            code="replay", event_type=event_type,
        )
    if isinstance(exc, pg.UniqueViolation) or type(exc) is pg.IntegrityConstraintViolation:
        return ConflictError(
            "the audit chain head moved under this append; retry", code="chain_conflict"
        )
    if isinstance(exc, pg.InsufficientPrivilege):
        return NotReadyError(
            "the server role may not append to signed_events; "
            "grant it SELECT, INSERT (cortexctl migrate does)"
        )
    return translate(exc)


_QUALIFIED = ", ".join(f"e.{column.strip()}" for column in _COLUMNS.split(","))


def _row(r: tuple[Any, ...]) -> EventRow:
    """An :class:`EventRow` from :data:`_COLUMNS` (and, streamed, the MAC and its version)."""
    sequence, agent_id, event_type, payload, payload_hash, signature, fpr, prev, digest, at = \
        r[:10]
    mac, version = r[10:] if len(r) == 12 else (None, None)
    return EventRow(
        sequence, agent_id, event_type, bytes(payload), bytes(payload_hash),
        None if signature is None else bytes(signature), fpr, bytes(prev), bytes(digest), at,
        None if mac is None else bytes(mac), version,
    )



@dataclass(frozen=True, slots=True)
class HeldRecord:
    """An event holding a write record: where it is, its type, its chain hash, its payload."""

    sequence: int
    event_type: str
    hash: bytes
    payload: bytes


async def held_records(
    conn: psycopg.AsyncConnection[Any], *, event_types: Sequence[str],
    payload_hashes: Sequence[bytes],
) -> dict[bytes, HeldRecord]:
    """The event of ``event_types`` holding each of ``payload_hashes`` (a statement is held
    once per type: the latest when several types hold it). Read by a read's receipts
    (ADR 0104), which prove the event that last wrote each memory."""
    if not payload_hashes:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT DISTINCT ON (payload_hash) payload_hash, sequence, event_type, hash, "
            "payload FROM signed_events WHERE event_type = ANY(%s) AND payload_hash = ANY(%s) "
            "ORDER BY payload_hash, sequence DESC",
            (list(event_types), list(payload_hashes)))
        return {bytes(row["payload_hash"]): HeldRecord(
            int(row["sequence"]), str(row["event_type"]), bytes(row["hash"]),
            bytes(row["payload"])) for row in await cur.fetchall()}


async def held_at(conn: psycopg.AsyncConnection[Any], sequences: Sequence[int]
                  ) -> dict[int, HeldRecord]:
    """The events at ``sequences`` (one statement), as :func:`held_records` gives them: the
    receipts of spoke records (ADR 0104), whose latest op record migration 0037 indexes."""
    if not sequences:
        return {}
    with translating():
        cur = await conn.execute(
            "SELECT sequence, event_type, hash, payload FROM signed_events "
            "WHERE sequence = ANY(%s)", (sorted(set(sequences)),))
        return {int(row["sequence"]): HeldRecord(
            int(row["sequence"]), str(row["event_type"]), bytes(row["hash"]),
            bytes(row["payload"])) for row in await cur.fetchall()}
