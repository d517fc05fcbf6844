"""Namespaces marked sealed keep no vector (ADR 0057 item 2), on PostgreSQL 17 + pgvector
with the embedded default embedder and memories sealed at rest.

A cortex embeds a vault memory and an open one; served again with ``vault/**`` sealed, the
vault memory's vector is gone before the first request (the sweep), a vault memory stored
then (single, batch, spoke-memory capture) gets none from the write-behind embedder nor
from the backfill (which settles with
nothing pending), a client vector there is refused 400 ``vector_in_sealed_namespace``
(single and batch), hybrid recall finds the vault memories by their words (no vector part,
no failure) and capabilities name the pattern.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
from hack.support.waiting import Pending, await_until

from attested_cortex.attest import masterkeys as mk
from attested_cortex.embedding import default
from tests.server.test_permissions_api import agents
from tests.spoke.test_dispatch_api import OWNER, ok
from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database

OPEN = "Deploys freeze on Fridays after 3pm"
VAULT = "The harbour pilot boards the tanker at dawn"
LATER = "The lighthouse keeper logs every storm by hand"


def embedded(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {str(r[0]) for r in conn.execute("SELECT memory_id FROM memory_embeddings")}


async def recall(client: CortexClient, query: str, **more: Any) -> Any:
    reply = await client.call("POST", "/v1/recall", {"query": query, "explain": True, **more})
    assert reply.status == 200, reply.text
    return reply.body


async def settled(client: CortexClient) -> bool | Pending:
    """The backfill idle with nothing pending (a sealed memory must not count as pending)."""
    caps = (await client.call("GET", "/v1/capabilities")).body["recall"]
    backfill = caps["backfill"]
    return (backfill["state"] == "idle" and backfill["pending"] == 0
            and caps["write_behind"]["queued"] == 0) or Pending(backfill)


async def test_sealed_namespace_keeps_no_vector(age_database: Database, make_cortex: MakeCortex,
                                                tmp_path: Path) -> None:
    dsn = age_database.dsn
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    before = await make_cortex(dsn, master_key={"file": key}, encryption={"at_rest": True})
    vault = await before.store("vault/a", VAULT)
    public = await before.store("kb", OPEN)
    await before.embedded_behind()
    assert embedded(dsn) == {vault["id"], public["id"]}

    sealed = await make_cortex(dsn, migrated=False, master_key={"file": key},
                               encryption={"at_rest": True, "sealed_namespaces": ["vault/**"]})
    assert embedded(dsn) == {public["id"]}  # the pattern added later: swept at start
    later = await sealed.store("vault/b", LATER)
    await sealed.embedded_behind()
    reply = await sealed.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "vault", "content": "a batch into the vault itself"},
        {"namespace": "kb/x", "content": "a batch into the open side"}]})
    assert reply.status == 201, reply.text
    # a spoke-memory capture into a sealed space (a server of the same settings, tokens)
    team = await agents(make_cortex, dsn, tmp_path, {"owner": OWNER},
                        master_key={"file": key},
                        encryption={"at_rest": True, "sealed_namespaces": ["vault/**"]})
    await ok(team, "owner", "memory.subjects.ensure", {"space_id": "vault", "subject_id": "u1",
                                                      "kind": "person:human"})
    await ok(team, "owner", "memory.records.create", {
        "space_id": "vault", "subject_id": "u1", "content": {"text": "a spoke record"},
        "placement": {"shared": True}})
    await team.client.embedded_behind(
        headers={"Authorization": f"Bearer {team.tokens['owner']}"})
    await await_until(lambda: settled(sealed), what="the backfill to settle", seconds=60,
                      interval_s=0.05)
    with psycopg.connect(dsn) as conn:
        opened = {str(r[0]) for r in conn.execute(
            "SELECT id FROM memories WHERE namespace NOT LIKE 'vault%'")}
    assert embedded(dsn) == opened and len(opened) == 2  # 4 vault memories: none

    vector = [0.1] * default.DIMENSION
    reply = await sealed.call("POST", "/v1/memories", {"namespace": "vault/c", "content": "x",
                                                       "embedding": vector})
    assert reply.status == 400, reply.text
    assert reply.body["error"]["code"] == "vector_in_sealed_namespace"
    reply = await sealed.call("POST", "/v1/memories:batch", {"memories": [
        {"namespace": "kb", "content": "y"},
        {"namespace": "vault/c", "content": "x", "embedding": vector}]})
    assert reply.status == 400 and reply.body["error"]["code"] == "vector_in_sealed_namespace"
    reply = await sealed.call("PATCH", f"/v1/memories/{later['id']}",
                              {"content": "changed", "embedding": vector})
    assert reply.status == 400 and reply.body["error"]["code"] == "vector_in_sealed_namespace"

    for query, wanted in (("harbour pilot at dawn", vault), ("lighthouse storm", later)):
        body = await recall(sealed, query)
        assert body["mode"] == "hybrid"
        first = body["results"][0]
        assert first["id"] == wanted["id"], query
        assert first["embedded"] is False and first["explain"]["vector"] is None
        assert all(r["explain"]["vector"] is None for r in body["results"]
                   if r["namespace"].startswith("vault"))
    body = await recall(sealed, "lighthouse storm", namespace="vault/b")
    assert [r["id"] for r in body["results"]] == [later["id"]]

    caps = (await sealed.call("GET", "/v1/capabilities")).body["encryption"]
    assert caps["sealed_namespaces"] == [{"pattern": "vault/**", "vectors": "none",
                                          "recall": "full-text over keyed blind tokens"}]
