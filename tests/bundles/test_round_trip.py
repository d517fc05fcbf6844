"""Export -> import on real PostgreSQL: the imported cortex answers recall, graph queries,
replay, listings, verifies and the deep audit exactly as its source did."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.served import CORTEXCTL

from attested_cortex.bundles import import_bundle
from attested_cortex.store.migrating import migrate
from tests.bundles.conftest import SERVER, serve
from tests.support.cortex import CortexClient, MakeCortex


async def answers(client: CortexClient, ids: list[str]) -> list[Any]:
    """The fixed query set, answer by answer (status and body)."""
    asked: list[tuple[str, str, Any]] = [
        ("POST", "/v1/recall", {"query": "lock waits", "limit": 20}),
        ("POST", "/v1/recall", {"query": "edited", "namespace": "kb/dev"}),
        ("GET", "/v1/memories?limit=100", None),
        ("GET", f"/v1/memories/{ids[0]}/replay?full=true", None),
        ("GET", f"/v1/memories/{ids[5]}", None),
        ("POST", "/v1/kg/query", {"start_id": ids[7], "depth": 3}),
        ("POST", "/v1/kg/paths", {"src_id": ids[7], "dst_id": ids[8], "max_depth": 4}),
        ("GET", f"/v1/kg/timeline?memory_id={ids[10]}", None),
        ("GET", "/v1/audit/verify?deep=true", None),
        *[("GET", f"/v1/memories/{i}", None) for i in ids[:12]],
    ]
    found = []
    for method, path, body in asked:
        reply = await client.call(method, path, body)
        found.append((path, reply.status, reply.body))
    return found


async def test_the_imported_cortex_answers_as_its_source(
    source: CortexClient, bundle: Path, new_target: Callable[[], str],
    make_cortex: MakeCortex, keys: Path,
) -> None:
    target = new_target()
    report = await import_bundle(target, bundle)
    assert report.signed_by == "dev:tester" and report.signatures_checked > 0
    imported = await serve(make_cortex, target, keys)
    ids = source.extra["ids"]
    before, after = await answers(source, ids), await answers(imported, ids)
    assert [a[:2] for a in after] == [b[:2] for b in before]
    assert after == before
    assert all(status == 200 for path, status, _ in after if path != f"/v1/memories/{ids[5]}")
    assert len(after[0][2]["results"]) == 20 and after[3][2]["citations"]
    assert after[5][2]["edges"] and after[6][2]["paths"] and after[7][2]
    assert len(after[2][2]["memories"]) == 54  # 60 stored, 6 deleted
    deep = after[8][2]
    assert deep["ok"] and deep["deep"]["mismatch_count"] == 0 and deep["deep"]["memories"] == 60
    links = await source.call("GET", f"/v1/memories/{ids[1]}", None)
    assert links.status == 200
    assert _table(source.dsn, "agent_usage") == _table(target, "agent_usage")
    assert _table(source.dsn, "signed_events") == _table(target, "signed_events")
    for table in ("memories", "links"):  # each write's Allow summary (ADR 0124) is carried
        summaries = _summaries(source.dsn, table)
        assert summaries and all(allowed for _, allowed in summaries)
        assert _summaries(target, table) == summaries


def _summaries(dsn: str, table: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT id, written_allowed FROM {table} ORDER BY id").fetchall()


def _table(dsn: str, table: str) -> list[Any]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()


async def test_cortexctl_export_from_the_server_streams_a_signed_bundle_that_imports(
    source: CortexClient, new_target: Callable[[], str], tmp_path: Path,
) -> None:
    out = tmp_path / "streamed"
    process = await asyncio.create_subprocess_exec(
        *CORTEXCTL, "export", "--server", source.base, "--out", str(out), "--agent-id",
        "dev:tester", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert "signed by dev:tester" in stdout.decode()
    target = new_target()
    report = await import_bundle(target, out, require_signed=True)
    assert report.rows["memories"] == 60
    assert _table(source.dsn, "signed_events") == _table(target, "signed_events")


@pytest.mark.parametrize("scopes", ["audit.read memory.read:kb/**", "memory.read"])
async def test_an_agent_without_unqualified_memory_read_and_audit_read_may_not_export(
    source: CortexClient, scopes: str,
) -> None:
    reply = await source.call("GET", "/v1/export", headers={"X-Cortex-Scopes": scopes})
    assert reply.status == 403, reply.text
    assert reply.body["error"]["code"] in ("scope_denied", "insufficient_scope"), reply.body


async def test_cortexctl_export_from_the_database_and_import_round_trip(
    source: CortexClient, keys: Path, new_target: Callable[[], str], tmp_path: Path,
) -> None:
    out, target = tmp_path / "cli-bundle", new_target()
    exported = await _cortexctl("export", "--database-url", source.dsn, "--out", str(out),
                                "--keys", str(keys), "--signer", "dev:tester")
    assert "signed by dev:tester" in exported
    imported = await _cortexctl("import", "--bundle", str(out), "--database-url", target,
                                "--keys", str(keys), "--require-signature", "--json")
    report = json.loads(imported)
    assert report["rows"]["memories"] == 60 and report["keys"] == "trusted"
    assert _table(source.dsn, "memories") == _table(target, "memories")


async def _cortexctl(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *CORTEXCTL, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, stderr.decode()
    return stdout.decode()


async def test_an_export_leaves_the_servers_connections_as_they_were(
    source: CortexClient,
) -> None:
    async def settings() -> list[Any]:
        async with source.services.db.connection() as conn:
            cur = await conn.execute("SELECT current_setting('statement_timeout') AS t, "
                                     "current_setting('TimeZone') AS z")
            return [await cur.fetchone()]

    before = await settings()
    assert (await source.call("GET", "/v1/export")).status == 200
    assert await settings() == before


async def test_an_import_into_postgresql_with_age_answers_graph_queries_as_the_source(
    source: CortexClient, bundle: Path, age_dsn: str, make_cortex: MakeCortex, keys: Path,
) -> None:
    await migrate(age_dsn)
    await import_bundle(age_dsn, bundle)
    imported = await make_cortex(age_dsn, migrated=False, **{**SERVER, "keys_dir": keys,
                                                             "graph_backend": "AGE"})
    ids = source.extra["ids"]
    graph = [("POST", "/v1/kg/query", {"start_id": ids[7], "depth": 3}),
             ("POST", "/v1/kg/paths", {"src_id": ids[7], "dst_id": ids[8], "max_depth": 4}),
             ("GET", f"/v1/kg/timeline?memory_id={ids[7]}", None)]
    for method, path, body in graph:
        want, got = await source.call(method, path, body), await imported.call(method, path, body)
        assert (got.status, got.body) == (want.status, want.body), path
