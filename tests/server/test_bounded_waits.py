"""Every wait inside the database is bounded: a lock held by another session (a memory's
row, a cited transcript's row, the audit chain, a whole table) answers 409 within the
server's ``db_lock_timeout_ms``, a statement past ``db_statement_timeout_ms`` answers 503
``database_timeout``; never a request that does not return. So are the wait on the
Kubernetes API server reviewing a token and on a remote hook that never answers, on every
route. (A slow embedder: ``test_slow_endpoint_never_holds_a_write`` in
tests/recall/test_hybrid.py.) Nothing is written meanwhile,
and the same request succeeds once the lock is gone.

Before, a session holding a row lock (an operator's ``SELECT ... FOR UPDATE``, a stuck
migration, an analytics query with ``LOCK TABLE``) made every write of that row, and with
the chain lock every write at all, wait as long as it was held.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import yaml

from attested_cortex.hooks.events import EVENTS
from attested_cortex.server.auth_kubernetes import REVIEW_TIMEOUT_S, KubernetesAuth, client_review
from attested_cortex.store.events import CHAIN_LOCK_KEY
from tests.server.test_hooks_api import hooks_file
from tests.support.cortex import CortexClient, MakeCortex, Reply
from tests.transcripts.common import count, store_transcript

#: The bound each request is given here: the lock timeout and slack for HTTP and the hooks.
BOUND_S = 5.0


@contextmanager
def held(dsn: str, *statements: str, params: Any = None) -> Iterator[None]:
    """Another session holding what ``statements`` lock, until the block ends."""
    with psycopg.connect(dsn) as conn:
        for statement in statements:
            conn.execute(statement, params)
        try:
            yield
        finally:
            conn.rollback()


async def bounded(client: CortexClient, method: str, path: str, body: Any = None) -> Reply:
    async with asyncio.timeout(BOUND_S):
        return await client.call(method, path, body)


async def test_a_held_row_lock_is_a_409_not_a_hang(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, db_lock_timeout_ms=300)
    memory = await client.store("n", "before")
    path = f"/v1/memories/{memory['id']}"
    with held(migrated_pg15_dsn, "SELECT 1 FROM memories WHERE id = %s FOR UPDATE",
              params=(memory["id"],)):
        for method, body in [("PATCH", {"content": "after"}), ("DELETE", None)]:
            reply = await bounded(client, method, path, body)
            assert reply.status == 409 and reply.body["error"]["code"] == "conflict", reply.text
        assert (await bounded(client, "GET", path)).body["content"] == "before"
    assert (await bounded(client, "PATCH", path, {"content": "after"})).status == 200


async def test_a_held_audit_chain_is_a_409_and_stores_nothing(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, db_lock_timeout_ms=300)
    with held(migrated_pg15_dsn, "SELECT pg_advisory_xact_lock(%s)", params=(CHAIN_LOCK_KEY,)):
        reply = await bounded(client, "POST", "/v1/memories", {"namespace": "n",
                                                               "content": "c"})
        assert reply.status == 409, reply.text
        assert count(migrated_pg15_dsn, "memories") == 0
    assert (await bounded(client, "POST", "/v1/memories", {"namespace": "n",
                                                           "content": "c"})).status == 201


async def test_a_held_transcript_row_bounds_a_citing_store(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, db_lock_timeout_ms=300,
                               transcripts={"enabled": True})
    trail = await store_transcript(client)
    body = {"namespace": "support/acme", "content": "cites", "citations": [
        {"transcript_id": trail["id"], "start": 0, "end": 10}]}
    with held(migrated_pg15_dsn, "SELECT 1 FROM transcripts WHERE id = %s FOR UPDATE",
              params=(trail["id"],)):
        reply = await bounded(client, "POST", "/v1/memories", body)
        assert reply.status == 409, reply.text
        assert count(migrated_pg15_dsn, "memories") == 0
    assert (await bounded(client, "POST", "/v1/memories", body)).status == 201


async def test_a_locked_table_bounds_reads_too(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, db_lock_timeout_ms=300)
    memory = await client.store("n", "c")
    with held(migrated_pg15_dsn, "LOCK TABLE memories IN ACCESS EXCLUSIVE MODE"):
        for method, path, body in [("GET", f"/v1/memories/{memory['id']}", None),
                                   ("GET", "/v1/memories?namespace=n", None),
                                   ("POST", "/v1/recall", {"query": "c"})]:
            reply = await bounded(client, method, path, body)
            assert reply.status in (409, 503), (path, reply.text)
    assert (await bounded(client, "GET", f"/v1/memories/{memory['id']}")).status == 200


async def test_a_statement_past_its_timeout_is_a_503(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False, db_lock_timeout_ms=60_000,
                               db_statement_timeout_ms=300)
    memory = await client.store("n", "before")
    path = f"/v1/memories/{memory['id']}"
    with held(migrated_pg15_dsn, "SELECT 1 FROM memories WHERE id = %s FOR UPDATE",
              params=(memory["id"],)):
        reply = await bounded(client, "PATCH", path, {"content": "after"})
        assert reply.status == 503, reply.text
        assert reply.body["error"]["code"] == "database_timeout", reply.text
        assert "unreachable" not in reply.body["error"]["message"]
    assert (await bounded(client, "GET", path)).body["content"] == "before"


async def test_an_api_server_that_trickles_its_answer_is_a_503(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """``--auth kubernetes`` against an API server that answers one byte a second: the
    client's read timeout restarts with every byte, so the review never ended; now the
    request answers 503 within the review's bound."""
    stop = asyncio.Event()

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            for byte in itertools.cycle(b"HTTP/1.1 200 OK\r\nX-Slow: "):
                writer.write(bytes([byte]))
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await stop.wait()  # a paced writer, ended with the test
                if stop.is_set():
                    break
        writer.close()

    server = await asyncio.start_server(trickle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "slow",
        "clusters": [{"name": "slow", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
        "users": [{"name": "u", "user": {"token": "unused"}}],
        "contexts": [{"name": "slow", "context": {"cluster": "slow", "user": "u"}}]}))
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               auth=KubernetesAuth(client_review(kubeconfig=kubeconfig)))
    try:
        async with asyncio.timeout(REVIEW_TIMEOUT_S + BOUND_S):
            reply = await client.call("GET", "/v1/capabilities", agent=None,
                                      headers={"Authorization": "Bearer some.jwt.value"})
        assert reply.status == 503 and reply.body["error"]["code"] == "not_ready", reply.text
        assert "some.jwt.value" not in reply.text
    finally:
        stop.set()
        server.close()
        await server.wait_closed()


async def test_a_remote_hook_that_never_answers_bounds_every_route(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """A remote hook on every event that accepts the connection, reads every request and
    never answers: each route answers (fail open) within the hook's budget per event."""
    silent: list[asyncio.StreamWriter] = []

    async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        silent.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass  # read and drop: the hook is there, and silent

    server = await asyncio.start_server(swallow, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hook = {"name": "silent", "events": list(EVENTS), "mode": "remote",
            "address": f"tcp://127.0.0.1:{port}", "timeout_ms": 300}
    client = await make_cortex(migrated_pg15_dsn, migrated=False, graph_backend="CTE",
                               hooks_file=hooks_file(tmp_path, hook),
                               transcripts={"enabled": True})
    try:
        trail = await bounded(client, "POST", "/v1/transcripts",
                              {"namespace": "n", "content": "user: hi\nagent: hello"})
        assert trail.status == 201, trail.text
        a = await bounded(client, "POST", "/v1/memories", {"namespace": "n", "content": "a",
                          "citations": [{"transcript_id": trail.body["id"], "start": 0,
                                         "end": 8}]})
        b = await bounded(client, "POST", "/v1/memories", {"namespace": "n", "content": "b"})
        assert a.status == b.status == 201, (a.text, b.text)
        ids = {"src_id": a.body["id"], "dst_id": b.body["id"]}
        link = await bounded(client, "POST", "/v1/links", {**ids, "relation": "related_to"})
        assert link.status == 201, link.text
        for method, path, body in [
            ("PATCH", f"/v1/memories/{a.body['id']}", {"title": "t"}),
            ("POST", "/v1/recall", {"query": "a"}),
            ("POST", "/v1/kg/query", {"start_id": a.body["id"], "depth": 1}),
            ("POST", "/v1/kg/paths", ids),
            ("GET", f"/v1/memories/{a.body['id']}/replay", None),
            ("POST", "/v1/kg/invalidate", {"link_id": link.body["id"]}),
            ("DELETE", f"/v1/memories/{b.body['id']}", None),
        ]:
            reply = await bounded(client, method, path, body)
            assert reply.status == 200, (path, reply.text)
        assert silent, "the hook was never reached"
        metrics = (await client.call("GET", "/metrics")).text
        # the first calls time out; then the silent connection is reset and backs off
        assert 'cause="timeout"' in metrics and 'cause="unavailable"' in metrics
    finally:
        for writer in silent:
            writer.close()
        server.close()
        await server.wait_closed()


async def _trickle(base: str, path: str, body: bytes, *, agent: str) -> tuple[int, bytes]:
    """Send the headers and the first byte of ``body``, then nothing: the answer."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            f"X-Agent-Id: {agent}\r\nContent-Length: {len(body)}\r\n\r\n")
    writer.write(head.encode() + body[:1])
    await writer.drain()
    try:
        async with asyncio.timeout(BOUND_S):
            status_line = await reader.readline()
            rest = await reader.read(4096)
    finally:
        writer.close()
    return int(status_line.split()[1]), rest


async def test_a_body_that_never_arrives_is_a_408_not_a_held_handler(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    """A client that sends its headers and then trickles (or stops sending) its body: the
    route answers 408 ``body_timeout`` after ``limits.body_read_timeout_s``, on the JSON
    routes and on /mcp alike, and nothing is written."""
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               limits={"body_read_timeout_s": 1})
    store = b'{"namespace": "n", "content": "never finished"}'
    status, rest = await _trickle(client.base, "/v1/memories", store, agent=client.agent)
    assert status == 408 and b"body_timeout" in rest, rest
    call = (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
            b'"memory_store", "arguments": {"namespace": "n", "content": "x"}}}')
    status, rest = await _trickle(client.base, "/mcp", call, agent=client.agent)
    assert status == 408 and b"body_timeout" in rest, rest
    assert count(migrated_pg15_dsn, "memories") == 0
    assert (await client.store("n", "the server still serves"))["content"]
