"""Export a whole cortex into a bundle: every table in one snapshot, cut into bounded,
digested chunks, then the keys and the manifest (signed when a signer is given).

Every table and column of the database is carried, or named by :data:`~.formats.NOT_CARRIED`
with its reason; anything else (a table of a newer schema this build does not know) is listed
in the manifest's ``omitted`` and the report is not ``complete`` (ADR 0085).

Called by ``cortexctl export`` (a :class:`DirectorySink`) and ``GET /v1/export`` (a tar
stream, :mod:`.tarring`). The caller passes a connection of the source database; the export
runs one REPEATABLE READ READ ONLY transaction on it, so chunks, counts and the chain head
come from the same moment while writes go on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from attested_cortex.attest.keyring import Keyring, render_keyring_file
from attested_cortex.attest.keys import AgentKey
from attested_cortex.bundles import copytext, manifests
from attested_cortex.bundles.formats import (
    CHUNK_BYTES,
    CHUNK_ROWS,
    COPY_SETTINGS,
    EVENTS,
    KEYS,
    MANIFEST,
    NOT_CARRIED,
    NOT_CARRIED_COLUMNS,
    SIGNATURE,
    TABLES,
    Table,
    chunk_name,
    omissions,
)
from attested_cortex.bundles.manifests import RawChunk
from attested_cortex.store import dumping, scanning
from attested_cortex.store.migrating import current_version


class SinkFn(Protocol):
    """Where a bundle's files go, in the order they are made (the manifest last)."""

    async def __call__(self, name: str, data: bytes) -> None: ...


@dataclass(frozen=True, slots=True)
class DirectorySink:
    """Write each file of the bundle under ``root``."""

    root: Path

    async def __call__(self, name: str, data: bytes) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@dataclass(frozen=True, slots=True)
class ExportReport:
    """What was exported: rows by table, bytes written, the chain head, the signer."""

    rows: dict[str, int]
    bytes: int
    chain_events: int
    chain_head: str | None
    signed_by: str | None
    #: What the database holds that this build neither carries nor may leave out (table ->
    #: columns; ADR 0085): empty for a complete bundle.
    omitted: dict[str, list[str]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.omitted


async def export_bundle(conn: dumping.AnyConn, sink: SinkFn, *, keyring: Keyring,
                        signer: AgentKey | None = None) -> ExportReport:
    """Write the bundle of the database behind ``conn`` to ``sink``."""
    chunks: list[RawChunk] = []
    async with scanning.snapshot(conn):
        await dumping.configure(conn, COPY_SETTINGS)
        version = await current_version(conn)
        omitted = omissions(await dumping.stored_columns(conn))
        head: list[bytes] = []
        for table in TABLES:
            await _table(conn, table, sink, chunks, head)
    rows = {t.name: sum(c["rows"] for c in chunks if c["table"] == t.name) for t in TABLES}
    keys = _keys(keyring)
    await sink(KEYS, keys)
    events = rows[EVENTS.name]
    last = copytext.event(next(copytext.raw_rows(head[0]))).hash.hex() if head else None
    manifest = manifests.render({
        "schema_version": version, "chunks": chunks, "rows": rows,
        "columns": {t.name: list(t.columns) for t in TABLES},
        "chain": {"events": events, "head": last}, "keys_sha256": manifests.digest(keys),
        "signed_by": signer.agent_id if signer is not None else None,
        "omitted": omitted, "not_carried": {**NOT_CARRIED, **{
            f"{t}.{c}": why for t, cs in NOT_CARRIED_COLUMNS.items() for c, why in cs.items()}},
    })
    if signer is not None:
        await sink(SIGNATURE, manifests.signature_of(manifest, signer))
    await sink(MANIFEST, manifest)
    size = sum(c["bytes"] for c in chunks) + len(keys) + len(manifest)
    return ExportReport(rows, size, events, last,
                        signer.agent_id if signer is not None else None, omitted)


async def _table(conn: dumping.AnyConn, table: Table, sink: SinkFn, chunks: list[RawChunk],
                 head: list[bytes]) -> None:
    batch: list[bytes] = []
    size = 0
    async for row in dumping.copy_out(conn, table.name, table.columns, table.order_by):
        batch.append(row)
        size += len(row)
        if len(batch) >= CHUNK_ROWS or size >= CHUNK_BYTES:
            await _flush(table, batch, sink, chunks, head)
            batch, size = [], 0
    if batch:
        await _flush(table, batch, sink, chunks, head)


async def _flush(table: Table, batch: list[bytes], sink: SinkFn, chunks: list[RawChunk],
                 head: list[bytes]) -> None:
    name = chunk_name(table.name, sum(1 for c in chunks if c["table"] == table.name))
    data = b"".join(batch)
    await sink(name, data)
    chunks.append({"name": name, "table": table.name, "rows": len(batch), "bytes": len(data),
                   "sha256": manifests.digest(data)})
    if table is EVENTS:
        head[:] = [batch[-1]]


def _keys(keyring: Keyring) -> bytes:
    files: list[Any] = [render_keyring_file(keyring.by_agent[a]) for a in keyring.agents()]
    return json.dumps(files, indent=1, sort_keys=True).encode() + b"\n"
