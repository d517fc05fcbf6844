"""Inbound federation (issue 42, docs/federation.md): three real ``cortexctl serve`` processes
on one PostgreSQL (a database each), over real mTLS on loopback with certificates from our
pki code. Cortexes ``b`` and ``c`` publish their signed keyrings; cortex ``a`` receives their
changes and stores, refuses or quarantines each.

Covered: a signed change stored with peer_attested provenance (hooks see ``origin``);
replays refused, also by a second server process (durable high-water mark); forged and
unsigned changes quarantined, listed (HTTP and MCP), never recalled; another peer's
certificate, no certificate and an unknown CA refused; conflicts resolved by (revision,
origin) whatever the order; own-origin changes not re-imported; rotation windows; deletes
final; links; a peer whose keyring is unreachable answered retry.

Seconds (about 30 here): three server starts for the module and two for the restart test;
every request is a real HTTPS round trip.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from hack.support.federated import write_peer_files
from hack.support.pgservers import PgServer
from hack.support.served import Served, free_port, serve

from attested_cortex import pki
from attested_cortex.attest.keyring import KeyRevision, render_keyring_file
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.peer_changes import SignedChange, sign_change
from attested_cortex.store.migrating import migrate
from tests.server.test_hooks_api import hooks_file, recorded, recorder
from tests.support.postgres import fresh_database

NOW = datetime.now(UTC)
AGENT = "team-b/planner"
ROTATED = "team-b/rotated"
OLD_KEY, NEW_KEY = generate_key(ROTATED), generate_key(ROTATED)  # type: ignore[arg-type]
ROTATED_AT = int(time.time() * 1000) - 3_600_000  # an hour ago


@dataclass
class Cortex:
    """One cortex's identity, certificates and files."""

    name: str
    workdir: Path
    ca: pki.Issued
    identity: AgentKey

    @property
    def ca_file(self) -> Path:
        return self.workdir / "ca.crt"

    def client_context(self, server: Cortex) -> ssl.SSLContext:
        """Verifies ``server``'s certificate and presents this cortex's client certificate."""
        context = pki.client_context(server.ca_file)
        context.load_cert_chain(self.workdir / "client.crt", self.workdir / "client.key")
        return context


def make_cortex(root: Path, name: str) -> Cortex:
    workdir = root / name
    workdir.mkdir()
    ca, identity = write_peer_files(workdir, name, NOW)
    return Cortex(name, workdir, ca, identity)


def config(cortex: Cortex, peers: list[dict[str, Any]], **extra: Any) -> Path:
    path = cortex.workdir / f"cortex-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump({**extra,
        "embedder": "none", "keys_dir": str(cortex.workdir / "keys"),
        "tls": {"cert_file": str(cortex.workdir / "server.crt"),
                "key_file": str(cortex.workdir / "server.key")},
        "federation": {"identity_dir": str(cortex.workdir / "identity"),
                       "client_cert_file": str(cortex.workdir / "client.crt"),
                       "client_key_file": str(cortex.workdir / "client.key"),
                       "peers": peers}}))
    return path


def peer_entry(peer: Cortex, url: str, **extra: Any) -> dict[str, Any]:
    return {"name": peer.name, "url": url, "ca_file": str(peer.ca_file),
            "public_key": peer.identity.public.public_b64, "accept": ["team/**"],
            "into": f"fed/{peer.name}", **extra}


@dataclass
class World:
    b: Cortex
    c: Cortex
    a: Cortex
    e: Cortex
    agent_b: AgentKey
    agent_c: AgentKey
    urls: dict[str, str]
    a_config: Path
    a_served: Served


@pytest.fixture(scope="module")
def world(pg15_server: PgServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("federation")
    b, c, a, e = (make_cortex(root, n) for n in ("b", "c", "a", "e"))
    agent_b, agent_c = generate_key(AGENT), generate_key("team-c/writer")  # type: ignore[arg-type]
    for cortex, agent in ((b, agent_b), (c, agent_c)):
        keyring = render_keyring_file([KeyRevision(agent.agent_id, agent.public.public_key)])
        (cortex.workdir / "keys" / "agent.json").write_text(json.dumps(keyring))
    # b's agent team-b/rotated: OLD_KEY until ROTATED_AT, NEW_KEY from then on
    (b.workdir / "keys" / "rotated.json").write_text(json.dumps(render_keyring_file([
        KeyRevision(ROTATED, NEW_KEY.public.public_key, 2, ROTATED_AT, None),
        KeyRevision(ROTATED, OLD_KEY.public.public_key, 1, None, ROTATED_AT)])))
    hooks = hooks_file(a.workdir, recorder(a.workdir, events=["pre_store", "post_store"]))
    with fresh_database(pg15_server, label="fed_b") as db_b, \
            fresh_database(pg15_server, label="fed_c") as db_c, \
            fresh_database(pg15_server, label="fed_a") as db_a:
        for db in (db_b, db_c, db_a):
            asyncio.run(migrate(db.dsn))
        with serve(db_b.dsn, b.workdir, "--config", str(config(b, [])),
                   tls=pki.client_context(b.ca_file)) as served_b, \
                serve(db_c.dsn, c.workdir, "--config", str(config(c, [])),
                      tls=pki.client_context(c.ca_file)) as served_c:
            urls = {"b": served_b.base, "c": served_c.base}
            a_config = config(a, [peer_entry(b, urls["b"]), peer_entry(
                c, urls["c"], scopes=["memory.write", "memory.read", "memory.override",
                                      "graph.write", "graph.read"],
                trust_tier="Trusted"), peer_entry(e, f"https://127.0.0.1:{free_port()}")],
                hooks_file=str(hooks))  # e never answers: its keyring cannot be fetched
            with serve(db_a.dsn, a.workdir, "--config", str(a_config),
                       tls=pki.client_context(a.ca_file)) as served_a:
                urls["a"] = served_a.base
                yield World(b, c, a, e, agent_b, agent_c, urls, a_config, served_a)


_SEQ = {"b": 0, "c": 0, "e": 0}


def change(agent: AgentKey | None, *, origin: str, kind: str = "memory.store",
           content: str = "the deploy window is Tuesday", namespace: str = "team/ops",
           object_id: uuid.UUID | None = None, revision: int = 1, home: str | None = None,
           sender: str | None = None, signer: AgentKey | None = None,
           signed_at: int | None = None) -> dict[str, Any]:
    """One change as a peer sends it; ``signer``: a key other than the author's (forgery)."""
    sender = sender or origin
    _SEQ[sender] += 1
    author = agent.agent_id if agent is not None else AGENT
    at = signed_at if signed_at is not None else int(time.time() * 1000)
    object_id = object_id or uuid.uuid4()
    home = home or origin
    signed = SignedChange(kind=kind, home=home, object_id=str(object_id), author=author,
                          signed_at=at, namespace=namespace, title="", content=content)
    key = signer or agent
    return {
        "correlation_id": str(uuid.uuid4()), "seq": _SEQ[sender], "origin": origin,
        "revision": revision, "kind": kind, "home": home, "object_id": str(object_id),
        "author": author, "signed_at": at,
        "signature": sign_change(key, signed) if key is not None else None,
        "expires_at": int(time.time() * 1000) + 30_000,
        "memory": {"namespace": namespace, "content": content},
    }


async def send(world: World, sender: Cortex, changes: list[dict[str, Any]], *,
               as_peer: str | None = None, url: str | None = None) -> tuple[int, Any]:
    """POST a batch to cortex a over mTLS with ``sender``'s client certificate."""
    async with aiohttp.ClientSession() as session, session.post(
            f"{url or world.urls['a']}/v1/federation/changes", json={"changes": changes},
            headers={"X-Cortex-Peer": as_peer or sender.name},
            ssl=sender.client_context(world.a)) as answer:
        return answer.status, await answer.json()


async def on_a(world: World, method: str, path: str, body: Any = None) -> Any:
    async with aiohttp.ClientSession(headers={"X-Agent-Id": "dev:admin"}) as session, \
            session.request(method, f"{world.urls['a']}{path}", json=body,
                            ssl=pki.client_context(world.a.ca_file)) as answer:
        assert answer.status == 200, await answer.text()
        return await answer.json()


async def recall(world: World, query: str) -> list[str]:
    found = await on_a(world, "POST", "/v1/recall", {"query": query, "limit": 50})
    return [r["content"] for r in found["results"]]


async def test_signed_change_stored_with_peer_attested_provenance(world: World) -> None:
    sent = change(world.agent_b, origin="b", content="signed orchid memo")
    status, answer = await send(world, world.b, [sent])
    assert status == 200, answer
    [result] = answer["results"]
    assert (result["status"], result["accepted"]) == ("stored", True)
    assert result["provenance"] == {
        "attest_level": "peer_attested", "origin": "b", "signed_by": AGENT, "peer": "b",
        "key_fingerprint": world.agent_b.public.fingerprint}
    stored = await on_a(world, "GET", f"/v1/memories/{result['memory_id']}")
    assert (stored["namespace"], stored["author"]) == ("fed/b/team/ops", "peer:b")
    provenance = await on_a(world, "GET", f"/v1/memories/{result['memory_id']}/provenance")
    assert provenance == {
        "memory_id": result["memory_id"], "federated": True, "attest_level": "peer_attested",
        "origin": "b", "revision": 1, "home": "b", "object_id": sent["object_id"],
        "signed_by": AGENT, "key_fingerprint": world.agent_b.public.fingerprint, "peer": "b",
        "deleted": False}
    assert await recall(world, "orchid") == ["signed orchid memo"]
    fired = [r for r in recorded(world.a.workdir)
             if r["payload"].get("origin", {}).get("object_id") == sent["object_id"]]
    assert [(r["event"], r["agent_id"]) for r in fired] == [
        ("pre_store", "peer:b"), ("post_store", "peer:b")]
    assert fired[0]["payload"]["origin"] == {
        "cortex": "b", "revision": 1, "home": "b", "object_id": sent["object_id"],
        "author": AGENT, "peer": "b"}


async def test_replayed_message_refused(world: World) -> None:
    sent = change(world.agent_b, origin="b", content="replayed marigold memo")
    first = (await send(world, world.b, [sent]))[1]["results"][0]
    again = (await send(world, world.b, [sent]))[1]["results"][0]
    fresh_id = {**sent, "correlation_id": str(uuid.uuid4())}  # same seq, new id
    later = (await send(world, world.b, [fresh_id]))[1]["results"][0]
    assert first["status"] == "stored"
    assert (again["status"], again["reason"]) == ("duplicate", "duplicate")
    assert later["status"] == "duplicate"
    assert await recall(world, "marigold") == ["replayed marigold memo"]


async def test_forged_and_unsigned_quarantined_never_recalled(world: World) -> None:
    forger = generate_key(AGENT)  # type: ignore[arg-type]
    forged = change(world.agent_b, origin="b", content="forged tamarind memo", signer=forger)
    unsigned = change(None, origin="b", content="unsigned tamarind memo")
    _, answer = await send(world, world.b, [forged, unsigned])
    assert [(r["status"], r["reason"]) for r in answer["results"]] == [
        ("quarantined", "bad_signature"), ("quarantined", "unsigned")]
    assert await recall(world, "tamarind") == []
    held = await on_a(world, "GET", "/v1/federation/quarantine?limit=1000")
    by_id = {q["correlation_id"]: q for q in held["items"]}
    assert by_id[forged["correlation_id"]]["reason"] == "bad_signature"
    assert by_id[unsigned["correlation_id"]]["change"]["memory"]["content"] == \
        "unsigned tamarind memo"


async def test_another_peers_certificate_refused(world: World) -> None:
    sent = change(world.agent_b, origin="b", content="impostor quince memo")
    status, answer = await send(world, world.c, [sent], as_peer="b")  # c's cert as b
    assert (status, answer["error"]["code"]) == (403, "wrong_peer")
    async with aiohttp.ClientSession() as session, session.post(
            f"{world.urls['a']}/v1/federation/changes", json={"changes": [sent]},
            headers={"X-Cortex-Peer": "b"},
            ssl=pki.client_context(world.a.ca_file)) as bare:  # no client certificate
        assert bare.status == 401
    stranger = make_cortex(world.a.workdir, "d")  # a CA a does not know: no handshake
    context = pki.client_context(world.a.ca_file)
    context.load_cert_chain(stranger.workdir / "client.crt", stranger.workdir / "client.key")
    with pytest.raises(aiohttp.ClientError):
        async with aiohttp.ClientSession() as session, session.post(
                f"{world.urls['a']}/v1/federation/changes", json={"changes": [sent]},
                headers={"X-Cortex-Peer": "b"}, ssl=context) as answer:
            await answer.read()
    assert await recall(world, "quince") == []


async def test_conflicts_resolve_by_revision_then_origin(world: World) -> None:
    """Two objects get the same two conflicting revision-2 updates in opposite orders; both
    end with the one whose (revision, origin) is greater: origin c's."""
    for order in (("b", "c"), ("c", "b")):
        object_id = uuid.uuid4()
        store = change(world.agent_b, origin="b", object_id=object_id,
                       content="conflict base papaya")
        assert (await send(world, world.b, [store]))[1]["results"][0]["status"] == "stored"
        updates = {
            "b": change(world.agent_b, origin="b", kind="memory.update", revision=2,
                        object_id=object_id, home="b", content=f"papaya from b {order}"),
            "c": change(world.agent_c, origin="c", kind="memory.update", revision=2,
                        object_id=object_id, home="b", content=f"papaya from c {order}")}
        statuses = []
        for sender in order:
            _, answer = await send(world, getattr(world, sender), [updates[sender]])
            statuses.append(answer["results"][0]["status"])
        assert statuses == (["updated", "updated"] if order == ("b", "c")
                            else ["updated", "superseded"])
        found = await recall(world, f"papaya from {order[0]}") + \
            await recall(world, f"papaya from {order[1]}")
        assert f"papaya from c {order}" in found
        assert f"papaya from b {order}" not in found


async def test_own_changes_not_reimported(world: World) -> None:
    """A -> B -> A: b sends a back a change whose origin is a; acknowledged, not stored."""
    agent_a = generate_key("team-a/own")  # type: ignore[arg-type]
    looped = change(agent_a, origin="a", sender="b", content="looped persimmon memo")
    _, answer = await send(world, world.b, [looped])
    assert [(r["status"], r["accepted"]) for r in answer["results"]] == [("own", True)]
    assert await recall(world, "persimmon") == []


async def test_replay_refused_after_restart(world: World, pg15_server: PgServer) -> None:
    """The high-water mark is durable: a second server process (empty replay cache) on the
    same database refuses what the first one handled."""
    sent = change(world.agent_b, origin="b", content="restart kumquat memo")
    with fresh_database(pg15_server, label="fed_restart") as database:
        await asyncio.to_thread(lambda: asyncio.run(migrate(database.dsn)))
        answers = []
        for _ in range(2):
            with serve(database.dsn, world.a.workdir, "--config", str(world.a_config),
                       tls=pki.client_context(world.a.ca_file)) as served:
                _, answer = await send(world, world.b, [sent], url=served.base)
                answers.append(answer["results"][0]["status"])
        assert answers == ["stored", "duplicate"]


def test_keyring_signed_by_identity(world: World) -> None:
    """b's published keyring verifies under b's identity key and names its agent's key."""
    import urllib.request

    from attested_cortex.attest.peer_changes import parse_keyring_document

    with urllib.request.urlopen(f"{world.urls['b']}/v1/federation/keyring",
                                context=pki.client_context(world.b.ca_file)) as answer:
        document = json.load(answer)
    keyring = parse_keyring_document(document, cortex="b",
                                     public_key=world.b.identity.public.public_key)
    assert keyring.knows(AGENT)
    document["agents"][0]["keys"][0]["public_key"] = base64.b64encode(bytes(32)).decode()
    with pytest.raises(Exception, match="does not verify"):
        parse_keyring_document(document, cortex="b",
                               public_key=world.b.identity.public.public_key)


async def test_rotation_windows_respected(world: World) -> None:
    """The retired key verifies what it signed inside its window, not after; the new key
    verifies from the rotation on."""
    before = ROTATED_AT - 60_000
    old_inside = change(OLD_KEY, origin="b", content="rotation fig inside", signed_at=before)
    old_after = change(OLD_KEY, origin="b", content="rotation fig after")
    new_after = change(NEW_KEY, origin="b", content="rotation fig new")
    _, answer = await send(world, world.b, [old_inside, old_after, new_after])
    assert [(r["status"], r["reason"]) for r in answer["results"]] == [
        ("stored", None), ("quarantined", "bad_signature"), ("stored", None)]
    assert answer["results"][0]["provenance"]["key_fingerprint"] == OLD_KEY.public.fingerprint
    assert sorted(await recall(world, "rotation fig")) == [
        "rotation fig inside", "rotation fig new"]


async def test_quarantine_listed_by_the_mcp_tool(world: World) -> None:
    """``federation_quarantine`` over the real /mcp endpoint lists what was held."""
    unsigned = change(None, origin="b", content="mcp listed lychee memo")
    await send(world, world.b, [unsigned])
    accept = {"Accept": "application/json, text/event-stream", "X-Agent-Id": "dev:admin"}
    context = pki.client_context(world.a.ca_file)
    async with aiohttp.ClientSession() as session:
        async def rpc(body: dict[str, Any], headers: dict[str, str]) -> Any:
            async with session.post(f"{world.urls['a']}/mcp", json=body, headers=headers,
                                    ssl=context) as answer:
                text = await answer.text()
                if "id" not in body:
                    return answer.headers, None
                data = text if not answer.content_type.startswith("text/event-stream") else \
                    next(line[5:] for line in text.splitlines() if line.startswith("data:"))
                return answer.headers, json.loads(data)

        opened, _ = await rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}, accept)
        headers = {**accept, "Mcp-Session-Id": opened["Mcp-Session-Id"],
                   "MCP-Protocol-Version": "2025-11-25"}
        await rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}, headers)
        _, called = await rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "federation_quarantine", "arguments": {"limit": 1000}}}, headers)
    items = called["result"]["structuredContent"]["items"]
    assert unsigned["correlation_id"] in {q["correlation_id"] for q in items}


async def test_unreachable_peer_keyring_answers_retry(world: World) -> None:
    """e's keyring cannot be fetched: its changes are answered retry (not accepted), neither
    stored nor quarantined, and the mark does not move (the same seq is not a duplicate)."""
    agent_e = generate_key("team-e/agent")  # type: ignore[arg-type]
    first = change(agent_e, origin="e", content="waiting guava memo")
    second = change(agent_e, origin="e", content="waiting guava later")
    _, answer = await send(world, world.e, [first, second])
    assert [(r["status"], r["accepted"], r["reason"]) for r in answer["results"]] == [
        ("retry", False, "peer_keyring_unavailable"), ("retry", False, "not_reached")]
    _, again = await send(world, world.e, [first])
    assert again["results"][0]["status"] == "retry"  # not "duplicate": nothing was handled
    held = await on_a(world, "GET", "/v1/federation/quarantine?limit=1000")
    assert first["correlation_id"] not in {q["correlation_id"] for q in held["items"]}
    assert await recall(world, "guava") == []


def link_change(agent: AgentKey, *, sender: str, src: uuid.UUID, dst: uuid.UUID,
                kind: str = "link.create", object_id: uuid.UUID | None = None,
                revision: int = 1, valid_until: int | None = None,
                signer: AgentKey | None = None) -> dict[str, Any]:
    """A link between two memories homed at ``sender`` (its agent signs the LinkPayload)."""
    _SEQ[sender] += 1
    now = int(time.time() * 1000)
    object_id = object_id or uuid.uuid4()
    signed = SignedChange(kind=kind, home=sender, object_id=str(object_id),
                          author=agent.agent_id, signed_at=now, src_id=str(src),
                          dst_id=str(dst), relation="supersedes", valid_from=now - 1000,
                          valid_until=valid_until)
    return {
        "correlation_id": str(uuid.uuid4()), "seq": _SEQ[sender], "origin": sender,
        "revision": revision, "kind": kind, "home": sender, "object_id": str(object_id),
        "author": agent.agent_id, "signed_at": now,
        "signature": sign_change(signer or agent, signed), "expires_at": now + 30_000,
        "link": {"src_home": sender, "src_id": str(src), "dst_home": sender,
                 "dst_id": str(dst), "relation": "supersedes", "valid_from": now - 1000,
                 "valid_until": valid_until}}


async def test_links_created_and_invalidated(world: World) -> None:
    """c's agent links two of c's memories, then closes the link; a forged link is
    quarantined and a link to a memory not held here is refused."""
    first = change(world.agent_c, origin="c", content="link end one starfruit")
    second = change(world.agent_c, origin="c", content="link end two starfruit")
    _, stored = await send(world, world.c, [first, second])
    src, dst = (uuid.UUID(first["object_id"]), uuid.UUID(second["object_id"]))
    local_src = stored["results"][0]["memory_id"]
    created = link_change(world.agent_c, sender="c", src=src, dst=dst)
    forged = link_change(world.agent_c, sender="c", src=src, dst=dst,
                         signer=generate_key("team-c/writer"))  # type: ignore[arg-type]
    stranger = link_change(world.agent_c, sender="c", src=src, dst=uuid.uuid4())
    _, answer = await send(world, world.c, [created, forged, stranger])
    assert [(r["status"], r["reason"]) for r in answer["results"]] == [
        ("linked", None), ("quarantined", "bad_signature"), ("refused", "link_end_not_here")]
    link_id = answer["results"][0]["link_id"]
    links = await on_a(world, "GET", f"/v1/memories/{local_src}/links")
    [link] = [x for x in links["links"] if x["id"] == link_id]
    assert (link["observed_by"], link["valid_until"]) == ("peer:c", None)
    closed = link_change(world.agent_c, sender="c", src=src, dst=dst, kind="link.invalidate",
                         object_id=uuid.UUID(created["object_id"]), revision=2,
                         valid_until=int(time.time() * 1000) + 60_000)
    _, answer = await send(world, world.c, [closed])
    assert answer["results"][0]["status"] == "invalidated"
    links = await on_a(world, "GET", f"/v1/memories/{local_src}/links")
    [link] = [x for x in links["links"] if x["id"] == link_id]
    assert link["valid_until"] is not None


async def test_delete_is_final(world: World) -> None:
    """b deletes a memory it sent; a later update of it (even of a greater revision) is
    superseded, and recall no longer finds it."""
    object_id = uuid.uuid4()
    store = change(world.agent_b, origin="b", object_id=object_id, content="doomed mango memo")
    delete = change(world.agent_b, origin="b", kind="memory.delete", object_id=object_id,
                    revision=2)
    late = change(world.agent_b, origin="b", kind="memory.update", object_id=object_id,
                  revision=3, content="revived mango memo")
    _, answer = await send(world, world.b, [store, delete, late])
    assert [(r["status"], r["reason"]) for r in answer["results"]] == [
        ("stored", None), ("deleted", None), ("superseded", "superseded")]
    memory = await on_a(world, "GET", f"/v1/memories/{answer['results'][0]['memory_id']}")
    assert memory["deleted"] is True
    assert await recall(world, "mango") == []


def test_settings_refuse_what_cannot_work(tmp_path: Path) -> None:
    """Federation without tls stops start-up before anything opens; a bad accept pattern
    or a peer named twice is refused when the config is read."""
    from attested_cortex.errors import InvalidInputError
    from attested_cortex.server.serving import run_server
    from attested_cortex.server.settings import load_settings

    peer = {"name": "b", "url": "https://127.0.0.1:1", "ca_file": str(tmp_path / "ca"),
            "public_key": base64.b64encode(bytes(32)).decode(), "accept": ["team/**"]}
    federation = {"identity_dir": str(tmp_path), "client_cert_file": str(tmp_path / "c"),
                  "client_key_file": str(tmp_path / "k"), "peers": [peer]}
    path = tmp_path / "cortex.yaml"
    path.write_text(yaml.safe_dump({"federation": federation}))
    with pytest.raises(InvalidInputError, match="federation needs tls"):
        asyncio.run(run_server(load_settings(path, {})))
    for bad in ({**federation, "peers": [{**peer, "accept": ["team/***"]}]},
                {**federation, "peers": [peer, peer]}):
        path.write_text(yaml.safe_dump({"federation": bad}))
        with pytest.raises(InvalidInputError, match=r"federation\.peers"):
            load_settings(path, {})


async def test_relayed_change_verified_with_the_origins_keyring(world: World) -> None:
    """b relays a change c's agent made: verified against c's published keyring (b's does
    not know c's agent); an unsigned change from e, whose keyring is unreachable, is still
    quarantined (no keyring is needed to see it is unsigned)."""
    relayed = change(world.agent_c, origin="c", sender="b", content="relayed pomelo memo")
    _, answer = await send(world, world.b, [relayed])
    [result] = answer["results"]
    assert (result["status"], result["provenance"]["origin"], result["provenance"]["peer"]) \
        == ("stored", "c", "b")
    unsigned = change(None, origin="e", content="unsigned from e")
    _, answer = await send(world, world.e, [unsigned])
    assert answer["results"][0]["status"] == "quarantined"
