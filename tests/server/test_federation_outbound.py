"""Outbound federation between three real cortexes (issue 42, docs/federation.md, ADR 0132):
three ``cortexctl serve`` processes, a database each on one PostgreSQL, real mTLS with
certificates from our pki code, every peer reached through a loopback TCP proxy per
direction (``hack/support/tcpproxy.py``) so one cortex can be partitioned off.

Covered: signed stores and updates made on each cortex reach the two others through the
outbox senders (stored under ``fed/<origin>``, ``peer_attested``, nothing quarantined, never
sent back: A -> B -> A ends at B); a partition of one cortex (both of its directions cut)
while all three keep writing, then healed: every cortex converges on every change, none
lost, none twice, each object's updates applied in order (the local revision of an imported
memory counts the changes applied to it; one out of order would have been ``superseded``). A
memory delete and a link invalidation made on one cortex reach the others signed by the
origin cortex's identity key (ADR 0138): applied there (recall no longer finds the memory),
while a delete another peer forges for an object it did not originate, or sends unsigned, is
quarantined. An agent's signed edit on B of a memory B received from A reaches A and C as
B's change (ADR 0141), and concurrent edits of one memory on A and B (A cut off) end with
the same winner, (2, "b"), on all three; each edit is acknowledged once by each other
cortex, and nothing received is sent on or back (the senders' counts). Other replays and
forgeries, and another peer's certificate, are refused by the receiver:
``tests/server/test_federation.py``.

The partition lasts until every sender towards or from the cut cortex has failed at least
five times in a row (past the top of its shortened retry schedule), not the issue's two
minutes: once the backoff is at its cap a sender behaves the same each further minute, and
the outbox holds the backlog whatever its age. The two-minute partition is run by
``make bench`` (bench/federation.py). Seconds (about 40 here): three server starts, and
every change is a real HTTPS round trip to each peer.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import psycopg
import pytest
import yaml
from hack.support.pgservers import PgServer
from hack.support.served import serve
from hack.support.tcpproxy import TcpProxy
from hack.support.waiting import Pending, await_until

from attested_cortex import pki
from attested_cortex.attest.keyring import KeyRevision, render_keyring_file
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.payloads import link_payload, memory_payload
from attested_cortex.attest.peer_changes import SignedChange, sign_origin
from attested_cortex.attest.signing import sign
from attested_cortex.store.migrating import migrate
from tests.server.test_federation import Cortex, config, make_cortex, peer_entry
from tests.support.postgres import fresh_database

pytestmark = pytest.mark.spawns

NAMES = ("a", "b", "c")
NAMESPACE = "team/notes"
#: A shortened schedule (the defaults are 1, 5, 25 s capped at 60 s: tests/service).
FAST = {"retry_seconds": [0.2, 0.5, 1.0], "backoff_max_seconds": 1.0, "poll_seconds": 0.5}


@dataclass
class Node:
    cortex: Cortex
    agent: AgentKey
    dsn: str
    url: str = ""


@dataclass
class Mesh:
    nodes: dict[str, Node]
    #: proxies[(x, y)]: how x reaches y
    proxies: dict[tuple[str, str], TcpProxy]

    def cut(self, name: str) -> None:
        for (x, y), proxy in self.proxies.items():
            if name in (x, y):
                proxy.cut()

    def heal(self, name: str) -> None:
        for (x, y), proxy in self.proxies.items():
            if name in (x, y):
                proxy.heal()


@pytest.fixture(scope="module")
def mesh(pg15_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    root = tmp_path_factory.mktemp("federation-out")
    cortexes = {n: make_cortex(root, n) for n in NAMES}
    agents = {n: generate_key(f"dev:writer-{n}") for n in NAMES}  # type: ignore[arg-type]
    for n in NAMES:
        keyring = render_keyring_file([KeyRevision(agents[n].agent_id,
                                                   agents[n].public.public_key)])
        (cortexes[n].workdir / "keys" / "writer.json").write_text(json.dumps(keyring))
    proxies = {(x, y): TcpProxy() for x in NAMES for y in NAMES if x != y}
    try:
        with fresh_database(pg15_server, label="fo_a") as db_a, \
                fresh_database(pg15_server, label="fo_b") as db_b, \
                fresh_database(pg15_server, label="fo_c") as db_c:
            dbs = {"a": db_a, "b": db_b, "c": db_c}
            for db in dbs.values():
                asyncio.run(migrate(db.dsn))
            nodes = {n: Node(cortexes[n], agents[n], dbs[n].dsn) for n in NAMES}
            configs = {n: config(cortexes[n], [
                # fed/**: the edits made here of memories received from a peer (ADR 0141)
                peer_entry(cortexes[p], proxies[(n, p)].url, send=["team/**", "fed/**"],
                           accept=["team/**", "fed/**"], trust_tier="Trusted", scopes=[
                               "memory.read:fed/**", "memory.write:fed/**",
                               "memory.forget:fed/**", "memory.read:team/**",
                               "memory.write:team/**", "graph.write", "graph.read"])
                for p in NAMES if p != n]) for n in NAMES}
            for n, path in configs.items():  # the shortened schedule
                settings = yaml.safe_load(path.read_text())
                settings["federation"].update(FAST)
                # memories are their author's: this writer and the peers edit the others'
                settings["permissions"] = {"rules": [{
                    "source": "team/editors", "namespace": "**", "operations": ["update"],
                    "agents": [agents[n].agent_id, *(f"peer:{p}" for p in NAMES if p != n)],
                    "decision": "allow"}]}
                path.write_text(yaml.safe_dump(settings))
            with serve(db_a.dsn, cortexes["a"].workdir, "--config", str(configs["a"]),
                       tls=pki.client_context(cortexes["a"].ca_file)) as sa, \
                    serve(db_b.dsn, cortexes["b"].workdir, "--config", str(configs["b"]),
                          tls=pki.client_context(cortexes["b"].ca_file)) as sb, \
                    serve(db_c.dsn, cortexes["c"].workdir, "--config", str(configs["c"]),
                          tls=pki.client_context(cortexes["c"].ca_file)) as sc:
                for n, served in (("a", sa), ("b", sb), ("c", sc)):
                    nodes[n].url = served.base
                    port = int(served.base.rsplit(":", 1)[1])
                    for (_, y), proxy in proxies.items():
                        if y == n:
                            proxy.target = port
                yield Mesh(nodes, proxies)
    finally:
        for proxy in proxies.values():
            proxy.close()


def _signed(node: Node, content: str, at: datetime,
            namespace: str = NAMESPACE) -> dict[str, str]:
    moment = at.replace(microsecond=0)
    payload = memory_payload(namespace=namespace, title="", content=content,
                             author=node.agent.agent_id, signed_at=moment)
    return {"content": content, "signed_at": moment.isoformat(),
            "signature": base64.b64encode(sign(node.agent, payload.encode())).decode()}


async def _call(node: Node, method: str, path: str, body: Any) -> Any:
    async with aiohttp.ClientSession(headers={"X-Agent-Id": node.agent.agent_id}) as session, \
            session.request(method, f"{node.url}{path}", json=body,
                            ssl=pki.client_context(node.cortex.ca_file)) as answer:
        assert answer.status in (200, 201), await answer.text()
        return await answer.json()


async def store(node: Node, content: str) -> str:
    body = {"namespace": NAMESPACE, "title": "", **_signed(node, content, datetime.now(UTC))}
    return str((await _call(node, "POST", "/v1/memories", body))["id"])


async def update(node: Node, memory_id: str, content: str,
                 namespace: str = NAMESPACE) -> None:
    await _call(node, "PATCH", f"/v1/memories/{memory_id}",
                _signed(node, content, datetime.now(UTC), namespace))


def held(receiver: Node, origin: str) -> dict[str, tuple[int, int, str]]:
    """What ``receiver`` holds from ``origin``: object id -> (applied revision, local
    revision, content)."""
    with psycopg.connect(receiver.dsn) as conn:
        rows = conn.execute(
            "SELECT o.object_id, o.applied_revision, m.revision, m.content, m.namespace "
            "FROM federation_objects o JOIN memories m ON m.id = o.local_id "
            "WHERE o.home = %s", (origin,)).fetchall()
    for row in rows:
        assert row[4] == f"fed/{origin}/{NAMESPACE}"
    return {str(r[0]): (int(r[1]), int(r[2]), str(r[3])) for r in rows}


def written(origin: Node) -> dict[str, tuple[int, str]]:
    """What ``origin`` wrote itself in the shared namespace: id -> (revision, content)."""
    with psycopg.connect(origin.dsn) as conn:
        rows = conn.execute("SELECT id, revision, content FROM memories WHERE namespace = %s",
                            (NAMESPACE,)).fetchall()
    return {str(r[0]): (int(r[1]), str(r[2])) for r in rows}


def scalar(node: Node, query: str, *args: Any) -> int:
    with psycopg.connect(node.dsn) as conn:
        row = conn.execute(query, args).fetchone()
    assert row is not None
    return int(row[0])


def failures(node: Node, peer: str) -> int:
    """Failed attempts in a row of ``node``'s sender towards ``peer``."""
    return scalar(node, "SELECT coalesce(max(failed_attempts), 0) FROM federation_cursors "
                        "WHERE peer = %s", peer)


def each_sent_once(mesh: Mesh) -> Any:
    """True once every sender was acknowledged once per change made on its cortex in the
    shared namespace, and for nothing else (nothing it received went on or back). The ACK
    follows the receiver's commit, so this is awaited after convergence."""
    counts = {}
    for name, node in mesh.nodes.items():
        made = scalar(node, "SELECT count(*) FROM outbox_events WHERE namespace = %s",
                      NAMESPACE)
        for peer in NAMES:
            if peer != name:
                counts[f"{name}->{peer}"] = (scalar(
                    node, "SELECT sent FROM federation_cursors WHERE peer = %s", peer), made)
    return all(sent == made for sent, made in counts.values()) or Pending(counts)


def converged(mesh: Mesh) -> Any:
    """True once every cortex holds exactly what each other wrote, in its last state, each
    change applied once and in order (local revision = origin revision)."""
    for origin_name, origin in mesh.nodes.items():
        expected = {i: (rev, rev, content) for i, (rev, content) in written(origin).items()}
        for name, receiver in mesh.nodes.items():
            if name != origin_name and (got := held(receiver, origin_name)) != expected:
                return Pending({"receiver": name, "origin": origin_name,
                                "missing": len(set(expected) - set(got)),
                                "differ": [i for i in got if got[i] != expected.get(i)]})
    return True


async def test_writes_on_each_reach_the_others(mesh: Mesh) -> None:
    for name, node in mesh.nodes.items():
        first = await store(node, f"{name}: the deploy window is Tuesday")
        await store(node, f"{name}: the on-call rota changed")
        await update(node, first, f"{name}: the deploy window is Wednesday")
    await await_until(lambda: converged(mesh), what="three cortexes converged", seconds=60)
    for node in mesh.nodes.values():
        assert scalar(node, "SELECT count(*) FROM federation_quarantine") == 0
        # nothing received was sent on or back: every cortex's memories are its own 2 and
        # the 2 of each peer
        assert scalar(node, "SELECT count(*) FROM memories WHERE deleted_at IS NULL") == 6
    await await_until(lambda: each_sent_once(mesh), what="every change acknowledged once",
                      seconds=30)
    a = mesh.nodes["a"]

    async def caught_up() -> Any:
        lags = {p: await metric(a, "cortex_federation_lag_events", p) for p in ("b", "c")}
        return all(v == 0 for v in lags.values()) or Pending(lags)

    await await_until(caught_up, what="a's senders report no lag", seconds=30)
    assert await metric(a, "cortex_federation_changes_acked_total", "b") == 3
    assert await metric(a, "cortex_federation_sending", "b") == 1
    assert await metric(a, "cortex_federation_last_ack_timestamp_seconds", "c") > 0
    status = (await _call(a, "GET", "/v1/capabilities", None))["federation"]
    assert status["enabled"] and [p["peer"] for p in status["peers"]] == ["b", "c"]
    assert all(p["lag"] == 0 and p["sent"] == 3 and p["last_ack_at"] and
               p["failed_attempts"] == 0 for p in status["peers"])
    assert "://" not in json.dumps(status)  # peer names only, never a URL


async def metric(node: Node, name: str, peer: str) -> float:
    """One of ``node``'s federation metrics for ``peer``, from ``GET /metrics``."""
    async with aiohttp.ClientSession() as session, session.get(
            f"{node.url}/metrics", ssl=pki.client_context(node.cortex.ca_file)) as answer:
        text = await answer.text()
    for line in text.splitlines():
        if line.startswith(f'{name}{{peer="{peer}"}} '):
            return float(line.split()[-1])
    return float("nan")


async def test_partitioned_cortex_catches_up_in_order(mesh: Mesh) -> None:
    a, b, c = (mesh.nodes[n] for n in NAMES)
    mesh.cut("c")
    try:
        ids = {n: await store(node, f"{n}: written during the partition")
               for n, node in mesh.nodes.items()}
        for step in range(4):  # each object's updates must arrive in this order
            for n, node in mesh.nodes.items():
                await update(node, ids[n], f"{n}: partition update {step}")
        more = {n: [await store(node, f"{n}: partition note {i}") for i in range(5)]
                for n, node in mesh.nodes.items()}

        def stuck() -> Any:
            fails = {"a->c": failures(a, "c"), "b->c": failures(b, "c"),
                     "c->a": failures(c, "a"), "c->b": failures(c, "b")}
            return all(f >= 5 for f in fails.values()) or Pending(fails)

        await await_until(stuck, what="senders to and from c failing", seconds=60)
        assert await metric(a, "cortex_federation_failed_attempts", "c") >= 1
        assert await metric(a, "cortex_federation_lag_events", "c") > 0
        [towards_c] = [p for p in (await _call(a, "GET", "/v1/capabilities", None))[
            "federation"]["peers"] if p["peer"] == "c"]
        assert towards_c["failed_attempts"] >= 5 and towards_c["lag"] > 0
        assert towards_c["last_failure_at"] and towards_c["last_error"].startswith("no answer")
        # a and b still replicate with each other meanwhile
        await await_until(lambda: (set(more["a"]) <= set(held(b, "a"))
                                   and set(more["b"]) <= set(held(a, "b"))) or Pending("a<->b"),
                          what="a and b replicating during the partition", seconds=60)
        assert not set(more["a"]) & set(held(c, "a"))
        assert not set(more["c"]) & set(held(a, "c"))
    finally:
        mesh.heal("c")
    await await_until(lambda: converged(mesh), what="convergence after healing", seconds=90)
    for node in mesh.nodes.values():
        assert scalar(node, "SELECT count(*) FROM federation_quarantine") == 0
        assert scalar(node, "SELECT count(*) FROM memories WHERE deleted_at IS NULL") == 3 * 8
    await await_until(lambda: each_sent_once(mesh), what="every change acknowledged once",
                      seconds=30)
    for n in NAMES:
        for receiver in (node for name, node in mesh.nodes.items() if name != n):
            revision, local_revision, content = held(receiver, n)[ids[n]]
            assert (revision, local_revision, content) == (5, 5, f"{n}: partition update 3")


async def link(node: Node, src: str, dst: str) -> str:
    """A link ``src`` -> ``dst`` signed by ``node``'s agent."""
    start = datetime.now(UTC).replace(microsecond=0)
    payload = link_payload(src_id=src, dst_id=dst, relation="related_to",
                           observed_by=node.agent.agent_id, valid_from=start, valid_until=None)
    body = {"src_id": src, "dst_id": dst, "relation": "related_to",
            "valid_from": start.isoformat(),
            "signature": base64.b64encode(sign(node.agent, payload.encode())).decode()}
    return str((await _call(node, "POST", "/v1/links", body))["id"])


def imported(receiver: Node, origin: str, object_id: str, table: str) -> Any:
    """``receiver``'s copy of ``origin``'s object: (deleted in federation_objects, the local
    row's deleted_at or valid_until), None while it has not arrived."""
    column = "deleted_at" if table == "memories" else "valid_until"
    with psycopg.connect(receiver.dsn) as conn:
        return conn.execute(
            f"SELECT o.deleted, t.{column} FROM federation_objects o "
            f"JOIN {table} t ON t.id = o.local_id WHERE o.home = %s AND o.object_id = %s",
            (origin, object_id)).fetchone()


async def recalled(node: Node, query: str) -> list[str]:
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "dev:admin"}) as session, \
            session.post(f"{node.url}/v1/recall", json={"query": query, "limit": 50},
                         ssl=pki.client_context(node.cortex.ca_file)) as answer:
        assert answer.status == 200, await answer.text()
        return [r["content"] for r in (await answer.json())["results"]]


def forged_delete(signer: Cortex, *, origin: str, object_id: str,
                  signed: bool = True) -> dict[str, Any]:
    """A delete of a memory homed at ``a``, claimed as ``origin``'s and signed with
    ``signer``'s identity key (or not at all)."""
    at = int(time.time() * 1000)
    change = SignedChange(kind="memory.delete", home="a", object_id=object_id,
                          author="dev:writer-a", signed_at=at, origin=origin, revision=9)
    return {"correlation_id": "", "origin": origin, "revision": 9, "kind": "memory.delete",
            "home": "a", "object_id": object_id, "author": "dev:writer-a", "signed_at": at,
            "signer": "origin",
            "signature": sign_origin(signer.identity, change) if signed else None,
            "expires_at": at + 30_000}


def copy_of(node: Node, home: str, object_id: str) -> Any:
    """``node``'s memory standing for ``home``'s memory ``object_id`` (on ``home``: the
    memory itself): (local id, content, applied revision, applied origin), None while it has
    not arrived; a memory no peer edited yet has no applied revision or origin."""
    with psycopg.connect(node.dsn) as conn:
        return conn.execute(
            "SELECT m.id::text, m.content, o.applied_revision, o.applied_origin "
            "FROM memories m LEFT JOIN federation_objects o ON o.local_id = m.id "
            "WHERE (o.home = %s AND o.object_id = %s) OR (%s AND m.id = %s::uuid)",
            (home, object_id, node.cortex.name == home, object_id)).fetchone()


def received(mesh: Mesh) -> dict[str, int]:
    """Changes each cortex was sent and acknowledged, by receiver (the senders' counts)."""
    return {n: sum(scalar(node, "SELECT coalesce(sum(sent), 0) FROM federation_cursors "
                                "WHERE peer = %s", n)
                   for name, node in mesh.nodes.items() if name != n) for n in NAMES}


def settled(mesh: Mesh) -> Any:
    """True once every sender's cursor is at its outbox's head: all sent or skipped."""
    behind = {}
    for name, node in mesh.nodes.items():
        head = scalar(node, "SELECT coalesce(max(seq), 0) FROM outbox_events")
        for peer in NAMES:
            if peer != name and (at := scalar(
                    node, "SELECT coalesce(max(cursor), 0) FROM federation_cursors "
                          "WHERE peer = %s", peer)) < head:
                behind[f"{name}->{peer}"] = (at, head)
    return not behind or Pending(behind)


def holding(mesh: Mesh, home: str, object_id: str, content: str) -> Any:
    """True once all three cortexes hold ``content`` for the memory."""
    got = {n: copy_of(node, home, object_id) for n, node in mesh.nodes.items()}
    return all(g is not None and g[1] == content for g in got.values()) or Pending(got)


async def test_an_edit_of_a_received_memory_reaches_its_home_and_the_others(
        mesh: Mesh) -> None:
    a, b = mesh.nodes["a"], mesh.nodes["b"]
    shared = await store(a, "a: the build cache lives on disk 3")
    await await_until(lambda: holding(mesh, "a", shared, "a: the build cache lives on disk 3"),
                      what="a's memory on b and c", seconds=60)
    await await_until(lambda: settled(mesh), what="senders idle", seconds=30)
    before = received(mesh)
    local = copy_of(b, "a", shared)[0]
    await update(b, local, "b: the build cache moved to disk 4", namespace=f"fed/a/{NAMESPACE}")
    await await_until(lambda: holding(mesh, "a", shared, "b: the build cache moved to disk 4"),
                      what="b's edit on a and c", seconds=60)
    await await_until(lambda: settled(mesh), what="senders idle", seconds=30)
    # b's edit went to a and c once; neither sent it on or back
    after = received(mesh)
    assert {n: after[n] - before[n] for n in NAMES} == {"a": 1, "b": 0, "c": 1}
    # a's own memory and c's copy record b's edit as applied; b's copy still the store
    # it received (its state is b's own edit)
    assert {n: copy_of(node, "a", shared)[2:] for n, node in mesh.nodes.items()} == {
        "a": (2, "b"), "b": (1, "a"), "c": (2, "b")}
    for node in mesh.nodes.values():
        assert scalar(node, "SELECT count(*) FROM federation_quarantine") == 0


async def test_concurrent_edits_on_two_cortexes_converge_on_one_winner(mesh: Mesh) -> None:
    a, b, c = (mesh.nodes[n] for n in NAMES)
    shared = await store(a, "a: the release train leaves at noon")
    await await_until(lambda: holding(mesh, "a", shared, "a: the release train leaves at noon"),
                      what="a's memory on b and c", seconds=60)
    await await_until(lambda: settled(mesh), what="senders idle", seconds=30)
    before = received(mesh)
    mesh.cut("a")
    try:  # both edit revision 1 while neither hears of the other: both make revision 2
        await update(a, shared, "a: the release train leaves at one")
        await update(b, copy_of(b, "a", shared)[0], "b: the release train leaves at two",
                     namespace=f"fed/a/{NAMESPACE}")
        await await_until(lambda: (copy_of(c, "a", shared)[1] == "b: the release train "
                                   "leaves at two") or Pending(copy_of(c, "a", shared)),
                          what="b's edit on c", seconds=60)
        # a's edit leaves first (a sends only what is still its memory's state: had b's
        # edit landed on a before a's sender read its own, a's would have stayed home)
        mesh.proxies[("a", "b")].heal()
        mesh.proxies[("a", "c")].heal()
        await await_until(lambda: (received(mesh)["b"] > before["b"]
                                   and received(mesh)["c"] > before["c"] + 1)
                          or Pending(received(mesh)), what="a's edit at b and c", seconds=60)
    finally:
        mesh.heal("a")
    # (2, "b") outranks (2, "a"): b's edit wins on all three, a's loses on b and c
    await await_until(lambda: holding(mesh, "a", shared, "b: the release train leaves at two"),
                      what="one winner on all three", seconds=60)
    await await_until(lambda: settled(mesh), what="senders idle", seconds=30)
    assert {n: copy_of(node, "a", shared)[2:] for n, node in mesh.nodes.items()} == {
        "a": (2, "b"), "b": (1, "a"), "c": (2, "b")}  # b superseded a's (2, "a")
    for node in (a, b, c):
        assert scalar(node, "SELECT count(*) FROM federation_quarantine") == 0
    after = received(mesh)  # each edit sent once to each other cortex, nothing echoed
    assert {n: after[n] - before[n] for n in NAMES} == {"a": 1, "b": 1, "c": 2}


async def test_deletes_and_invalidations_replicate_signed_by_their_origin(mesh: Mesh) -> None:
    a, b, c = (mesh.nodes[n] for n in NAMES)
    doomed = await store(a, "a: the quokka runbook is obsolete")
    kept = await store(a, "a: the quokka runbook v2")
    edge = await link(a, doomed, kept)

    def arrived() -> Any:
        return all(imported(n, "a", doomed, "memories") and imported(n, "a", edge, "links")
                   for n in (b, c)) or Pending("store and link on b and c")

    await await_until(arrived, what="memories and link replicated", seconds=60)
    assert any("quokka runbook is obsolete" in r for r in await recalled(b, "quokka"))
    await _call(a, "POST", "/v1/kg/invalidate", {"link_id": edge})
    await _call(a, "DELETE", f"/v1/memories/{doomed}", None)

    def applied() -> Any:
        got = {n: (imported(node, "a", doomed, "memories"), imported(node, "a", edge, "links"))
               for n, node in (("b", b), ("c", c))}
        done = all(m[0] and m[1] is not None and e[0] and e[1] is not None
                   for m, e in got.values())
        return done or Pending(got)

    await await_until(applied, what="delete and invalidation applied on b and c", seconds=60)
    for node in (b, c):
        assert not any("obsolete" in r for r in await recalled(node, "quokka"))
        assert any("runbook v2" in r for r in await recalled(node, "quokka"))
        assert scalar(node, "SELECT count(*) FROM federation_quarantine") == 0
    # b forges deletes of a's memory on c: as its own (not b's object), as a's (b's key
    # does not verify under a's identity), unsigned. The seqs are far above b's sender's,
    # so this runs last.
    changes = [forged_delete(b.cortex, origin="b", object_id=kept),
               forged_delete(b.cortex, origin="a", object_id=kept),
               forged_delete(b.cortex, origin="a", object_id=kept, signed=False)]
    for seq, change in enumerate(changes, start=10**9):
        change.update(seq=seq, correlation_id=str(uuid.uuid4()))
    async with aiohttp.ClientSession() as session, session.post(
            f"{c.url}/v1/federation/changes", json={"changes": changes},
            headers={"X-Cortex-Peer": "b"}, ssl=b.cortex.client_context(c.cortex)) as answer:
        assert answer.status == 200, await answer.text()
        results = (await answer.json())["results"]
    assert [(r["status"], r["reason"]) for r in results] == [
        ("quarantined", "not_origin_object"), ("quarantined", "bad_signature"),
        ("quarantined", "unsigned")]
    assert imported(c, "a", kept, "memories") == (False, None)
    assert any("runbook v2" in r for r in await recalled(c, "quokka"))
