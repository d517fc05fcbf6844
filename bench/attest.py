"""Attestation benchmark: sign/verify cost per link, signed link write p95 with the chain
append, signed links/s, and audit-chain verification throughput.

Run by ``make bench`` (through ``python -m bench``) or alone: ``python -m bench.attest
[--dsn URL] [--quick]``. Without ``--dsn`` it starts a private PostgreSQL 17 + AGE server.
Writes docs/benchmarks/attest.json. Goals (docs/attestation.md): signed link write p95
<= 5 ms including the chain append, >= 300 signed links/s, chain verification >= 20k events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import psycopg

from attested_cortex.attest.auditing import append_event, verify_chain
from attested_cortex.attest.keyring import KeyRevision, build_keyring
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import LinkPayload, link_payload
from attested_cortex.attest.signing import sign, verify
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from bench.common import age_server, create_database, percentiles, write_result

AGENT = AgentId("k8s:bench/agent")
LINK_SQL = (
    "INSERT INTO links (src_id, dst_id, relation, observed_by, valid_from, signature, "
    "attest_level, signed_by, signed_at) VALUES (%s, %s, 'related_to', %s, "
    "to_timestamp(%s / 1000.0), %s, 'self_signed', %s, now()) RETURNING id"
)


def _payload(index: int, src: uuid.UUID, dst: uuid.UUID) -> LinkPayload:
    return link_payload(src_id=src, dst_id=dst, relation="related_to", observed_by=AGENT,
                        valid_from=1_767_225_600_000 + index, valid_until=None)


def _per_item_us(run: Callable[[], object], count: int) -> dict[str, float]:
    """Wall-clock and CPU microseconds per item (CPU time is robust on a shared machine)."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return {"wall_us": round((time.perf_counter() - wall) * 1e6 / count, 2),
            "cpu_us": round((time.process_time() - cpu) * 1e6 / count, 2)}


def crypto_costs(key: AgentKey, count: int) -> dict[str, Any]:
    """Microseconds per link to encode, sign (encoding included) and verify."""
    src, dst = uuid.uuid4(), uuid.uuid4()
    payloads = [_payload(i, src, dst) for i in range(count)]
    encoded = [p.encode() for p in payloads]
    signatures = [sign(key, m) for m in encoded]
    public = key.public.public_key
    return {
        "links": count,
        "encode": _per_item_us(lambda: [p.encode() for p in payloads], count),
        "encode_and_sign": _per_item_us(lambda: [sign(key, p.encode()) for p in payloads], count),
        "verify": _per_item_us(
            lambda: [verify(public, m, s) for m, s in zip(encoded, signatures, strict=True)],
            count,
        ),
    }


async def _memories(dsn: str, count: int) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(count)]
    async with await psycopg.AsyncConnection.connect(dsn) as conn, conn.cursor() as cur:
        await cur.executemany(
            "INSERT INTO memories (id, namespace, author, content) VALUES (%s, 'bench', 'b', 'x')",
            [(i,) for i in ids],
        )
    return ids


async def _write_links(
    dsn: str, key: AgentKey, indices: range, ids: list[uuid.UUID]
) -> list[float]:
    """One signed link write per transaction: insert the row, then append the event."""
    samples = []
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        for index in indices:
            # distinct (src, dst) pairs: links allow one open link per triple
            src, dst = ids[index % 100], ids[100 + (index // 100) % 100]
            started = time.perf_counter()
            async with conn.transaction():
                payload = _payload(index, src, dst)
                message = payload.encode()
                signature = sign(key, message)
                row = (src, dst, AGENT, payload.valid_from, signature, AGENT)
                await conn.execute(LINK_SQL, row)
                await append_event(conn, agent_id=AGENT, event_type="link.created",
                                   payload=message, signature=signature,
                                   key_fingerprint=key.public.fingerprint)
            samples.append((time.perf_counter() - started) * 1000)
    return samples


async def chain_appends(dsn: str, key: AgentKey, *, count: int) -> dict[str, float]:
    """Latency of the chain append alone (lock, head, seal, insert, commit)."""
    samples = []
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        for index in range(count):
            started = time.perf_counter()
            async with conn.transaction():
                await append_event(conn, agent_id=AGENT, event_type="bench.append",
                                   payload={"n": index}, signer=key)
            samples.append((time.perf_counter() - started) * 1000)
    return percentiles(samples)


async def link_writes(dsn: str, key: AgentKey, *, count: int, writers: int) -> dict[str, Any]:
    """Latency of serial writes, then throughput of ``writers`` concurrent writers."""
    ids = await _memories(dsn, 200)
    serial = await _write_links(dsn, key, range(count), ids)
    per = count // writers
    started = time.perf_counter()
    await asyncio.gather(*(
        _write_links(dsn, key, range(count * (w + 1), count * (w + 1) + per), ids)
        for w in range(writers)
    ))
    elapsed = time.perf_counter() - started
    return {"serial_latency_ms": percentiles(serial), "concurrent_writers": writers,
            "concurrent_links": per * writers,
            "links_per_s": round(per * writers / elapsed, 1)}


async def _bulk_chain(dsn: str, key: AgentKey, count: int) -> int:
    """Extend the chain by ``count`` signed events quickly (one COPY of what a writer states;
    the BEFORE INSERT trigger of migration 0006 places and hashes each row, as for any append)."""
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor() as copy_cur, copy_cur.copy(
            "COPY signed_events (agent_id, event_type, payload, signature, key_fingerprint) "
            "FROM STDIN"
        ) as copy:
            for index in range(count):
                message = f"bulk-{index}".encode()
                await copy.write_row((AGENT, "link.created", message, sign(key, message),
                                      key.public.fingerprint))
        cur = await conn.execute("SELECT coalesce(max(sequence), 0) FROM signed_events")
        row = await cur.fetchone()
        await conn.commit()
    assert row is not None
    return int(row[0])


async def chain_verification(dsn: str, key: AgentKey, *, count: int) -> dict[str, Any]:
    """Events per second verified, hash chain only and with every signature checked."""
    total = await _bulk_chain(dsn, key, count)
    keyring = build_keyring([KeyRevision(AGENT, key.public.public_key)])
    results: dict[str, Any] = {"events": total}
    for label, ring in (("chain_only", None), ("with_signatures", keyring)):
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            started, cpu = time.perf_counter(), time.process_time()
            report = await verify_chain(conn, keyring=ring)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
        assert report.ok and report.events == total, report
        results[f"{label}_events_per_s"] = round(total / elapsed)
        # The verifier's own CPU (all its threads), without the database's share.
        results[f"{label}_events_per_verifier_cpu_s"] = round(total / cpu)
    return results


async def run(dsn: str, *, quick: bool) -> dict[str, Any]:
    await migrate(dsn)
    load = [round(x, 2) for x in os.getloadavg()]
    key = generate_key(AGENT)
    writes = await link_writes(dsn, key, count=300 if quick else 2000, writers=4)
    appends = await chain_appends(dsn, key, count=300 if quick else 2000)
    verification = await chain_verification(dsn, key, count=10_000 if quick else 100_000)
    started_cpu = time.process_time()
    crypto = crypto_costs(key, 2000 if quick else 20000)
    return {
        "load_average_at_start": load,
        "crypto_cpu_seconds": round(time.process_time() - started_cpu, 2),
        "crypto": crypto,
        "signed_link_write": writes,
        "chain_append_only_latency_ms": appends,
        "chain_verification": verification,
        "goals": {"write_p95_ms": 5, "links_per_s": 300, "verify_events_per_s": 20000},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.attest")
    parser.add_argument("--dsn", help="an empty database to use (default: a private server)")
    parser.add_argument("--quick", action="store_true", help="smaller counts")
    args = parser.parse_args(argv)
    with nullcontext(None) if args.dsn else age_server() as server:
        dsn = args.dsn or create_database(server, "bench_attest")
        result = asyncio.run(run(dsn, quick=args.quick))
    path = write_result("attest", result)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
