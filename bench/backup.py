"""Logical backup benchmark: export and import throughput (memories/s), bundle size against
database size, and the bundle's chain verification (events/s), at 100k memories with links.

Run by ``make bench`` (through ``python -m bench``) or alone: ``python -m bench.backup
[--memories N]``. Starts a private PostgreSQL 17 + AGE server (the production database).
The source is filled in bulk, not through the API: N memories, N-1 links (one in ten signed
by the agent's key), and a signed write record in the chain for each, so the import's deep
sweep and signature checks do all their work; then, through a running server, N/100
transcripts and a memory citing each (so transcripts, their frames and citations travel
too). After the import both cortexes are served side by side and a fixed query set (recall,
listings, reads, graph queries, replays, the chain check) must answer byte for byte the
same. Also times ``audit verify --deep`` (what the
verification Job runs) on the imported database, and the export to / import from a real
S3 server (MinIO, when ``ensure-binaries.sh minio`` built it). Writes
docs/benchmarks/backup.json. Goals
(issue 24): export >= 5,000 memories/s, import with full verification >= 2,000 memories/s,
verification >= 20,000 events/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg

from attested_cortex.attest import cbor
from attested_cortex.attest.keyring import EMPTY_KEYRING, KeyRevision, build_keyring
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.records import link_record, memory_record
from attested_cortex.attest.signing import sign
from attested_cortex.bundles import DirectorySink, export_bundle, import_bundle
from attested_cortex.bundles.checking import ChainWalk
from attested_cortex.bundles.formats import EVENTS
from attested_cortex.bundles.manifests import parse
from attested_cortex.bundles.objectstores import (
    BundleStore,
    StoreSettings,
    bundle_name,
    parse_location,
)
from attested_cortex.store.dumping import owner_connection
from attested_cortex.store.events import APPEND_VALUES
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from bench.common import RESULTS, age_server, create_database, write_result

AGENT = AgentId("k8s:bench/agent")
_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _memory(index: int) -> Memory:
    # Distinct times, as memories written one by one have: recall's candidate pool is the
    # newest matches, and among equal times which ones enter it is the table's physical
    # order, which an import does not keep (found by the round trip's recall answers).
    at = _T0 + timedelta(milliseconds=index)
    return Memory(uuid.uuid4(), f"bench/ns{index % 50}", f"note {index}",
                  f"deploy note {index}: the migration waited on lock t{index % 97}; " * 3,
                  (f"t{index % 7}",), {}, AGENT, 1, at, at, None)


def _link(index: int, src: Memory, dst: Memory, key: AgentKey) -> Link:
    valid_from = _T0 + timedelta(milliseconds=index)
    signature = None
    if index % 10 == 0:
        payload = link_payload(src_id=src.id, dst_id=dst.id, relation="related_to",
                               observed_by=AGENT, valid_from=valid_from, valid_until=None)
        signature = sign(key, payload.encode())
    return Link(uuid.uuid4(), src.id, dst.id, "related_to", valid_from, None, AGENT, signature,
                "self_signed" if signature else "unsigned", AGENT if signature else None,
                valid_from if signature else None, valid_from, None)


async def fill(dsn: str, count: int, key: AgentKey) -> None:
    """The source cortex: memories, links and one signed write record for each."""
    memories = [_memory(i) for i in range(count)]
    links = [_link(i, memories[i], memories[i + 1], key) for i in range(count - 1)]
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        async with conn.cursor().copy(
                "COPY memories (id, namespace, title, content, tags, author, created_at, "
                "updated_at) FROM STDIN") as copy:
            for m in memories:
                await copy.write_row((m.id, m.namespace, m.title, m.content, list(m.tags),
                                      m.author, m.created_at, m.updated_at))
        async with conn.cursor().copy(
                "COPY links (id, src_id, dst_id, relation, valid_from, observed_by, "
                "signature, attest_level, signed_by, signed_at, created_at) FROM STDIN"
                ) as copy:
            for lk in links:
                await copy.write_row((lk.id, lk.src_id, lk.dst_id, lk.relation, lk.valid_from,
                                      lk.observed_by, lk.signature, lk.attest_level,
                                      lk.signed_by, lk.signed_at, lk.created_at))
        records = [("memory.stored", memory_record(m)) for m in memories] + [
            ("link.recorded", link_record(lk)) for lk in links]
        fingerprint = key.public.fingerprint
        async with conn.cursor() as cur:
            for start in range(0, len(records), 5000):
                rows = []
                for kind, record in records[start:start + 5000]:
                    body = cbor.encode(record)
                    rows.append((AGENT, kind, body, sign(key, body), fingerprint))
                await cur.executemany(APPEND_VALUES, rows)
        await conn.commit()


HEADERS: dict[str, str] = {"X-Agent-Id": "dev:bench"}
#: Both cortexes serve alike: no rate quota (one agent sends every request), transcripts on,
#: recall by full text (vectors are not part of a bundle: an embedder would fill them later).
SERVE_CONFIG = "quotas:\n  enabled: false\ntranscripts:\n  enabled: true\n"


def _serve_flags(directory: Path) -> tuple[str, ...]:
    config = directory / "bench-backup.yaml"
    config.write_text(SERVE_CONFIG)
    return ("--embedder", "none", "--config", str(config))
DIALOGUE = ("user: the deploy of {n} failed at the migration step, why?\n"
            "agent: the migration {n} waited on the lock of table t{m}; retried after it.\n") * 6


async def _api(session: Any, method: str, url: str, body: Any = None) -> tuple[int, bytes]:
    async with session.request(method, url, json=body) as reply:
        return reply.status, await reply.read()


async def transcripts(base: str, count: int) -> list[str]:
    """``count`` transcripts stored through the API, each cited by a new memory; the ids of
    the citing memories."""
    import aiohttp

    cited = []
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for n in range(count):
            status, raw = await _api(session, "POST", f"{base}/v1/transcripts", {
                "namespace": f"bench/ns{n % 50}", "content": DIALOGUE.format(n=n, m=n % 97)})
            assert status == 201, raw
            transcript = json.loads(raw)
            status, raw = await _api(session, "POST", f"{base}/v1/memories", {
                "namespace": f"bench/ns{n % 50}", "content": f"finding {n}: lock t{n % 97}",
                "citations": [{"transcript_id": transcript["id"], "start": 0, "end": 120}]})
            assert status == 201, raw
            cited.append(json.loads(raw)["id"])
    return cited


def query_set(ids: list[str], cited: list[str]) -> list[tuple[str, str, Any]]:
    """The fixed query set both cortexes answer (memory ids from the fill, in order)."""
    pick = [ids[i] for i in (0, 1, 7, 500, len(ids) // 2, len(ids) - 2)]
    return [
        *[("POST", "/v1/recall", {"query": q, "limit": 20}) for q in (
            "migration waited on lock t13", "deploy note 4242", "finding lock t7")],
        ("POST", "/v1/recall", {"query": "deploy note", "namespace": "bench/ns3", "limit": 50}),
        ("GET", "/v1/memories?limit=500", None),
        *[("GET", f"/v1/memories/{i}", None) for i in pick],
        *[("GET", f"/v1/memories/{i}/replay?full=true", None) for i in cited[:3]],
        *[("GET", f"/v1/memories/{i}/replay", None) for i in cited[-3:]],
        ("POST", "/v1/kg/query", {"start_id": pick[2], "depth": 3}),
        ("POST", "/v1/kg/paths", {"src_id": pick[2], "dst_id": ids[10], "max_depth": 4}),
        ("GET", f"/v1/kg/timeline?memory_id={pick[3]}", None),
        ("GET", "/v1/links/{link}/verify", None),
        ("GET", "/v1/audit/verify", None),
    ]


async def answers(base: str, asked: list[tuple[str, str, Any]], link: str) -> list[Any]:
    """Every answer of the query set: (path, status, body bytes); the second page of the
    listing follows the first's cursor."""
    import aiohttp

    out = []
    async with aiohttp.ClientSession(headers=HEADERS) as session:
        for method, path, body in asked:
            status, raw = await _api(session, method, base + path.replace("{link}", link),
                                     body)
            out.append((f"{method} {path} {json.dumps(body) if body else ''}".strip(), status,
                        raw))
            if path.startswith("/v1/memories?"):  # and the next page, by its cursor
                cursor = json.loads(raw)["next"]
                status, raw = await _api(session, "GET",
                                         f"{base}/v1/memories?limit=500&cursor={cursor}")
                out.append(("page 2", status, raw))
    return out


def _size(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _db_size(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


async def _audit(dsn: str, keyring: Any, events: int) -> dict[str, Any]:
    """What the verification Job runs (``cortexctl audit verify --deep`` with the keyring):
    the chain read from the database with every signature checked, then the deep sweep."""
    from attested_cortex.attest.auditing import verify_chain
    from attested_cortex.attest.sweeping import sweep
    from attested_cortex.store.database import Database

    database = await Database.open(dsn, min_size=1, max_size=1, statement_timeout_s=3600.0)
    try:
        async with database.connection() as conn:
            started = time.perf_counter()
            report = await verify_chain(conn, keyring=keyring)
            chain_s = time.perf_counter() - started
            started = time.perf_counter()
            swept = await sweep(conn)
            sweep_s = time.perf_counter() - started
    finally:
        await database.close()
    assert report.ok and report.events == events, report
    return {"events": events, "signatures_checked": report.signatures_checked,
            "chain_seconds": round(chain_s, 2), "chain_events_per_s": round(events / chain_s),
            "deep_sweep_seconds": round(sweep_s, 2), "deep_ok": swept.as_json()["ok"]}


def _verification(bundle: Path, keyring: Any) -> dict[str, Any]:
    """The bundle's chain walked with every signature checked, and hashes only; and what
    bounds it: CPU per event (the walk's and its worker processes'), of which one Ed25519
    verify is most. The wall rate depends on how much of the two cores the machine's other
    work leaves (load average); the CPU per event does not, and 2 cores / CPU per event is
    the rate the walk reaches on an idle machine of this kind (the signatures run in two
    worker processes, ADR 0077)."""
    signed = _walk(bundle, keyring)
    return {"with_signatures": signed, "chain_only": _walk(bundle, EMPTY_KEYRING),
            "ed25519_verify_cpu_us": _verify_cpu_us(bundle, keyring),
            "cpu_bound_events_per_s_on_2_idle_cores": round(
                2e6 / float(signed["cpu_us_per_event"]))}


def _verify_cpu_us(bundle: Path, keyring: Any, count: int = 5000) -> dict[str, float]:
    """CPU microseconds of one Ed25519 verify over the chain's first signed events: libsodium
    (PyNaCl, one write's check) and ed25519-zebra (the chain walks' bulk check, ADR 0077)."""
    from attested_cortex.attest.bulkverify import first_invalid
    from attested_cortex.attest.signing import verify
    from attested_cortex.bundles import copytext

    data = (bundle / "chunks" / "signed_events-000000.copy").read_bytes()
    events = [copytext.event(f) for f in copytext.raw_rows(data)]
    signed = [e for e in events if e.signature is not None][:count]
    key = keyring.by_agent[AGENT][0].public_key
    cpu = time.process_time()
    assert all(verify(key, e.payload, e.signature or b"") for e in signed)
    libsodium = (time.process_time() - cpu) / len(signed) * 1e6
    cpu = time.process_time()
    assert first_invalid([(e.signature or b"", e.payload, key) for e in signed]) is None
    zebra = (time.process_time() - cpu) / len(signed) * 1e6
    return {"libsodium": round(libsodium, 1), "zebra": round(zebra, 1)}


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (the bulk verifier's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def _walk(bundle: Path, keyring: Any) -> dict[str, Any]:
    manifest = parse((bundle / "manifest.json").read_bytes())
    chunks = [(c["name"], (bundle / c["name"]).read_bytes()) for c in manifest.chunks
              if c["table"] == EVENTS.name]
    started, cpu = time.perf_counter(), _cpu()
    with ChainWalk(keyring) as walk:  # its worker processes are reaped on leaving
        for name, data in chunks:
            walk.walk(name, data)
        walk.finish(manifest)
    seconds, cpu = time.perf_counter() - started, _cpu() - cpu
    events = manifest.chain_events
    return {"events": events, "signatures_checked": walk.signatures,
            "seconds": round(seconds, 2), "events_per_s": round(events / seconds),
            "cpu_seconds": round(cpu, 2), "cpu_us_per_event": round(cpu / events * 1e6, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


async def _object_store(server: Any, source: str, count: int, keyring: Any,
                        key: AgentKey) -> dict[str, Any]:
    """Export to a real S3 server (MinIO as a local process, when built) and import back:
    what ``cortexctl export --to`` and ``import --from`` cost over the directory path."""
    from hack.support import objectstore  # MinIO, as the tests start it

    with tempfile.TemporaryDirectory(prefix="cortex-s3-") as tmp:
        try:
            running = objectstore.start(Path(tmp) / "data", bucket="backups")
        except objectstore.ObjectStoreError as exc:
            return {"skipped": str(exc)}
        try:
            store = BundleStore(StoreSettings(running.endpoint, running.access_key,
                                              running.secret_key),
                                parse_location("s3://backups/bench"))
            name = bundle_name(datetime.now(UTC))
            started = time.perf_counter()
            async with owner_connection(source) as conn:
                await export_bundle(conn, store.sink(name), keyring=keyring, signer=key)
            export_s = time.perf_counter() - started
            target = create_database(server, "bench_backup_s3_target")
            await migrate(target)
            started = time.perf_counter()
            store.download(name, Path(tmp) / "bundle")
            await import_bundle(target, Path(tmp) / "bundle", trusted=keyring,
                                require_signed=True)
            import_s = time.perf_counter() - started
        finally:
            running.stop()
    return {"export_seconds": round(export_s, 2), "export_memories_per_s": round(
        count / export_s), "import_seconds": round(import_s, 2),
        "import_memories_per_s": round(count / import_s),
        "includes": "upload of every object; download, then the same verified import"}


def _first_signed_link(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT id FROM links WHERE signature IS NOT NULL "
                           "ORDER BY created_at, id LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


def _ids(dsn: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        return [str(r[0]) for r in conn.execute(
            "SELECT id FROM memories ORDER BY created_at, title, id").fetchall()]


def compare(server: Any, source: str, target: str, cited: list[str]) -> dict[str, Any]:
    """Serve both cortexes; the fixed query set's answers, byte for byte."""
    from hack.support.served import serve

    ids, link = _ids(source), _first_signed_link(source)
    asked = query_set(ids, cited)
    with tempfile.TemporaryDirectory(prefix="cortex-serve-") as tmp:
        flags = _serve_flags(Path(tmp))
        with serve(source, Path(tmp), *flags) as a:
            before = asyncio.run(answers(a.base, asked, link))
        with serve(target, Path(tmp), *flags) as b:
            after = asyncio.run(answers(b.base, asked, link))
    pairs = list(zip(before, after, strict=True))
    clocked = [x[0] for x, y in pairs if x != y and x[:2] == y[:2]
               and _unclocked(x[2]) == _unclocked(y[2])]
    differ = [x[0] for x, y in pairs if x != y and x[0] not in clocked]
    not_ok = [(x[0], x[1]) for x in before if x[1] != 200]
    first = next(((x, y) for x, y in pairs if x[0] in differ), None)
    return {"queries": len(before), "identical": not differ,
            "first_difference": None if first is None else _where(first[0], first[1]),
            "byte_identical": len(pairs) - len(clocked) - len(differ),
            "identical_but_the_clock": clocked, "differ": differ,
            "not_200_at_the_source": not_ok,
            "answer_bytes": sum(len(x[2]) for x in before),
            "note": "recall's score has a recency term computed from now() at the query "
                    "(store/recall.py): asked seconds apart, the two cortexes' scores differ "
                    "in the last digits; those answers are compared without score and "
                    "recency (ids, order, contents and every other field byte for byte)"}


def _where(a: tuple[str, int, bytes], b: tuple[str, int, bytes]) -> dict[str, Any]:
    at = next((i for i, (x, y) in enumerate(zip(a[2], b[2], strict=False)) if x != y),
              min(len(a[2]), len(b[2])))
    return {"query": a[0], "status": [a[1], b[1]], "byte": at,
            "source": a[2][max(0, at - 150):at + 150].decode(errors="replace"),
            "import": b[2][max(0, at - 150):at + 150].decode(errors="replace")}


def _unclocked(raw: bytes) -> Any:
    """A recall answer without the numbers that depend on the time it was asked."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("score", "recency")}
        return [strip(v) for v in value] if isinstance(value, list) else value
    try:
        return strip(json.loads(raw))
    except ValueError:
        return None


async def run(server: Any, count: int) -> dict[str, Any]:
    from hack.support.served import serve

    key = generate_key(AGENT)
    keyring = build_keyring([KeyRevision(AGENT, key.public.public_key)])
    source = create_database(server, "bench_backup_source")
    target = create_database(server, "bench_backup_target")
    await migrate(source)
    await migrate(target)
    started = time.perf_counter()
    await fill(source, count, key)
    filled = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="cortex-serve-") as tmp, serve(
            source, Path(tmp), *_serve_flags(Path(tmp))) as served:
        started = time.perf_counter()
        cited = await transcripts(served.base, max(1, count // 100))
        transcripts_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory(prefix="cortex-bundle-") as tmp:
        bundle = Path(tmp) / "bundle"
        started = time.perf_counter()
        async with owner_connection(source) as conn:
            exported = await export_bundle(conn, DirectorySink(bundle), keyring=keyring,
                                           signer=key)
        export_s = time.perf_counter() - started
        bundle_bytes, source_bytes = _size(bundle), _db_size(source)
        verification = _verification(bundle, keyring)
        started = time.perf_counter()
        imported = await import_bundle(target, bundle, trusted=keyring, require_signed=True)
        import_s = time.perf_counter() - started
    load_at_import = [round(x, 2) for x in os.getloadavg()]
    audit = await _audit(target, keyring, exported.chain_events)
    same = await asyncio.to_thread(compare, server, source, target, cited)
    s3 = await _object_store(server, source, count, keyring, key)
    memories = exported.rows["memories"]
    return {
        "memories": memories, "links": exported.rows["links"],
        "transcripts": exported.rows["transcripts"], "events": exported.chain_events,
        "fill_seconds": round(filled, 1),
        "transcripts_through_the_api_seconds": round(transcripts_s, 1),
        "load_average_at_import": load_at_import,
        "load_average_after_run": [round(x, 2) for x in os.getloadavg()],
        "export": {"seconds": round(export_s, 2),
                   "memories_per_s": round(memories / export_s)},
        "import": {"seconds": round(import_s, 2),
                   "memories_per_s": round(memories / import_s),
                   "signatures_checked": imported.signatures_checked,
                   "phases_seconds": imported.phases,
                   "includes": "digests, manifest signature, chain walk with signatures, "
                               "link and memory signatures, deep sweep, commit, AGE mirror"},
        "size": {"bundle_bytes": bundle_bytes, "database_bytes": source_bytes,
                 "bundle_to_database": round(bundle_bytes / source_bytes, 3)},
        "verification": verification,
        "audit_verify_deep_on_the_import": audit,
        "round_trip_answers": same,
        "object_store": s3,
        "goals": {"export_memories_per_s": 5000, "import_memories_per_s": 2000,
                  "verification_events_per_s": 20000},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.backup")
    parser.add_argument("--memories", type=int, default=100_000)
    args = parser.parse_args(argv)
    with age_server() as server:
        result = asyncio.run(run(server, args.memories))
    previous = RESULTS / "backup.json"  # the physical path's figures are another bench's
    if previous.exists():
        physical = json.loads(previous.read_text()).get("physical")
        if physical is not None:
            result["physical"] = physical
    path = write_result("backup", result)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
