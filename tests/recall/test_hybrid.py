"""Hybrid recall over HTTP on PostgreSQL 17 + pgvector: the embedded default, client vectors,
an OpenAI-compatible endpoint, model change and backfill, and databases without pgvector."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE
from hack.support.waiting import await_until
from psycopg import sql

from attested_cortex.embedding import default, minilm
from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from attested_cortex.store import embeddings as store_embeddings
from attested_cortex.store import recall as store_recall
from attested_cortex.store.migrating import migrate
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA
from tests.recall.embedserver import embed_server
from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database

DEPLOY = "Deploys freeze on Fridays after 3pm"
OTHERS = ("The cafeteria serves lunch at noon",
          "Rotate the database password every ninety days",
          "Kubernetes operators reconcile the desired state")


async def recall(cortex: CortexClient, query: str, **more: Any) -> Any:
    reply = await cortex.call("POST", "/v1/recall", {"query": query, **more})
    assert reply.status == 200, reply.text
    return reply.body


async def capabilities(cortex: CortexClient) -> dict[str, Any]:
    reply = await cortex.call("GET", "/v1/capabilities")
    assert reply.status == 200, reply.text
    recall_part: dict[str, Any] = reply.body["recall"]
    return recall_part


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not in /metrics")


async def test_default_embedder_finds_a_paraphrase(age_database: Database,
                                                   make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn)
    target = await cortex.store("kb", DEPLOY)
    for text in OTHERS:
        await cortex.store("kb", text)
    await cortex.embedded_behind()
    body = await recall(cortex, "when do we stop shipping?")
    assert body["mode"] == "hybrid"
    assert body["results"][0]["id"] == target["id"]
    assert all(r["embedded"] is True for r in body["results"])
    caps = await capabilities(cortex)
    assert caps["mode"] == "hybrid" and caps["vector_extension"] is True
    assert caps["embedder"] == {"source": "default", "model": default.MODEL,
                                "dimension": default.DIMENSION}
    assert caps["vector_index"] is True


async def test_explain_gives_each_score_part(age_database: Database,
                                             make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn)
    target = await cortex.store("kb", "database password rotation policy",
                                title="password rotation")
    await cortex.store("kb", "the lunch menu")
    await cortex.embedded_behind()
    body = await recall(cortex, "password rotation", explain=True)
    first = body["results"][0]
    assert first["id"] == target["id"]
    parts = first["explain"]
    assert parts["fulltext"]["rank"] == 1 and parts["fulltext"]["score"] > 0.8
    assert parts["vector"]["rank"] == 1 and 0 < parts["vector"]["similarity"] <= 1
    # each list scaled between its worst and best candidate, then weighted (docs/adr/0094):
    # the best of both lists is 1 (the title's weight lifts its BM25 score past 1)
    assert parts["fulltext"]["score"] > 1
    assert parts["relevance"] == pytest.approx(1.0, abs=1e-5)
    # recency and proximity only order equal relevance (docs/adr/0093)
    assert first["score"] == pytest.approx(parts["relevance"], abs=1e-5)
    plain = await recall(cortex, "password rotation")
    assert "explain" not in plain["results"][0]


@pytest.mark.parametrize("exact_max", [2000, 0], ids=["exact", "planner"])
async def test_namespace_filter_searches_its_vectors(age_database: Database,
                                                     make_cortex: MakeCortex, exact_max: int,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A recall with a namespace searches the vectors of that namespace and its ancestors
    (a small namespace exactly, by primary key; a large one as the planner chooses:
    docs/adr/0014), never those of others."""
    monkeypatch.setattr(store_recall, "EXACT_MAX", exact_max)
    # every vector a candidate, however unlike (a cosine may go below 0): the test is
    # about which namespaces are searched, not how alike their memories are
    cortex = await make_cortex(age_database.dsn, embedding={"min_similarity": -1.0})
    inside = await cortex.store("org/team", DEPLOY)
    parent = await cortex.store("org", "Kubernetes operators watch custom resources")
    outside = await cortex.store("other/team", DEPLOY + " (other team)")
    for i, text in enumerate(OTHERS):
        await cortex.store("org/team", text)
        await cortex.store("other/team", f"{text} ({i})")
    await cortex.embedded_behind()
    body = await recall(cortex, "when do we stop shipping?", namespace="org/team/sub",
                        explain=True)
    ids = [r["id"] for r in body["results"]]
    assert body["mode"] == "hybrid" and ids[0] == inside["id"]
    assert parent["id"] in ids and outside["id"] not in ids
    assert body["results"][0]["explain"]["vector"]["rank"] == 1
    assert {r["namespace"] for r in body["results"]} <= {"org/team", "org"}


async def test_budget_still_holds_in_hybrid_mode(age_database: Database,
                                                 make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn)
    await cortex.store("kb", "alpha " * 200)
    small = await cortex.store("kb", "alpha beta")
    body = await recall(cortex, "alpha", budget_tokens=10)
    assert body["mode"] == "hybrid" and body["truncated"] is True
    assert [r["id"] for r in body["results"]] == [small["id"]]
    assert body["tokens"] <= 10


async def test_embedder_none_is_fulltext(age_database: Database,
                                         make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn, embedder="none")
    await cortex.store("kb", DEPLOY)
    body = await recall(cortex, "when do we stop shipping?")
    assert body["mode"] == "fulltext" and body["results"] == []
    assert "embedded" not in (await recall(cortex, "deploys"))["results"][0]
    caps = await capabilities(cortex)
    assert caps["mode"] == "fulltext" and caps["embedder"] is None
    assert "--embedder none" in caps["reason"]


async def test_updates_re_embed_and_deletes_forget_the_vector(age_database: Database,
                                                              make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn)
    memory = await cortex.store("kb", "The cafeteria serves lunch at noon")
    await cortex.store("kb", "Rotate the database password every ninety days")
    patched = await cortex.call("PATCH", f"/v1/memories/{memory['id']}", {"content": DEPLOY})
    assert patched.status == 200
    await cortex.embedded_behind()
    first = (await recall(cortex, "when do we stop shipping?"))["results"][0]
    assert first["id"] == memory["id"] and first["embedded"] is True
    assert (await cortex.call("DELETE", f"/v1/memories/{memory['id']}")).status == 200
    with psycopg.connect(age_database.dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memory_embeddings WHERE memory_id = %s",
                           (memory["id"],)).fetchone()
        revision = conn.execute("SELECT revision FROM memory_embeddings").fetchall()
    assert row == (0,) and revision == [(1,)]


# -- client vectors ---------------------------------------------------------------------------

CLIENT = {"embedder": "client", "embedding": {"model": "client-test", "dimension": 3}}


async def test_client_vectors(age_database: Database, make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn, **CLIENT)
    east = await cortex.store("kb", "alpha note", embedding=[1, 0, 0])
    north = await cortex.store("kb", "beta note", embedding=[0, 1, 0])
    bare = await cortex.store("kb", "gamma note")
    body = await recall(cortex, "unrelated words", embedding=[0.1, 0.9, 0.0])
    assert body["mode"] == "hybrid"
    assert [r["id"] for r in body["results"]][:1] == [north["id"]]
    body = await recall(cortex, "note", embedding=[0.9, 0.1, 0.0], explain=True)
    by_id = {r["id"]: r for r in body["results"]}
    assert body["results"][0]["id"] == east["id"]
    assert by_id[bare["id"]]["embedded"] is False and by_id[bare["id"]]["explain"]["vector"] is None
    no_vector = await recall(cortex, "note")
    assert no_vector["mode"] == "fulltext" and "no query embedding" in no_vector["degraded"]
    caps = await capabilities(cortex)
    assert caps["embedder"] == {"source": "client", "model": "client-test", "dimension": 3}


async def test_dimension_mismatch_is_refused_clearly(age_database: Database,
                                                     make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn, **CLIENT)
    reply = await cortex.call("POST", "/v1/memories",
                              {"namespace": "kb", "content": "x", "embedding": [1, 2]})
    assert reply.status == 400
    assert "2 dimensions" in reply.body["error"]["message"]
    assert "have 3" in reply.body["error"]["message"]
    reply = await cortex.call("POST", "/v1/recall", {"query": "x", "embedding": [1, 2, 3, 4]})
    assert reply.status == 400 and "4 dimensions" in reply.body["error"]["message"]
    for bad in ([0, 0, 0], ["a", 1, 2], [], "1,2,3"):
        reply = await cortex.call("POST", "/v1/memories",
                                  {"namespace": "kb", "content": "x", "embedding": bad})
        assert reply.status == 400, (bad, reply.text)
    raw = b'{"namespace": "kb", "content": "x", "embedding": [NaN, 1, 2]}'
    assert (await cortex.call("POST", "/v1/memories", raw=raw)).status == 400
    listed = await cortex.call("GET", "/v1/memories?namespace=kb")
    assert listed.status == 200 and listed.body["memories"] == []  # nothing half-written


async def test_server_embedders_refuse_client_vectors(age_database: Database,
                                                      make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn)
    reply = await cortex.call("POST", "/v1/memories",
                              {"namespace": "kb", "content": "x",
                               "embedding": [1.0] * default.DIMENSION})
    assert reply.status == 400 and "does not take client vectors" in reply.text


# -- an OpenAI-compatible endpoint ------------------------------------------------------------

async def test_openai_compatible_endpoint(age_database: Database,
                                          make_cortex: MakeCortex) -> None:
    async with embed_server() as endpoint:
        cortex = await make_cortex(age_database.dsn, embedder=endpoint.url)
        target = await cortex.store("kb", DEPLOY)
        await cortex.store("kb", "The cafeteria serves lunch at noon")
        await cortex.embedded_behind()
        body = await recall(cortex, "when do we stop shipping")
        assert body["mode"] == "hybrid" and body["results"][0]["id"] == target["id"]
        caps = await capabilities(cortex)
        assert caps["embedder"] == {"source": "remote", "model": "concepts-test",
                                    "dimension": 16}
        assert DEPLOY in endpoint.texts and "when do we stop shipping" in endpoint.texts
        with psycopg.connect(age_database.dsn) as conn:
            models = conn.execute("SELECT DISTINCT model, dim FROM memory_embeddings").fetchall()
        assert models == [("concepts-test", 16)]


async def test_slow_endpoint_never_holds_a_write(age_database: Database,
                                                 make_cortex: MakeCortex) -> None:
    async with embed_server() as endpoint:
        cortex = await make_cortex(age_database.dsn, embedder=endpoint.url,
                                   embedding={"timeout_ms": 200})
        await await_until(lambda: _mode_is(cortex, "hybrid"), seconds=30)
        endpoint.delay_s = 2.0
        started = time.monotonic()
        late = await cortex.store("kb", DEPLOY)
        took = time.monotonic() - started
        assert took < 1.5, took  # the 200 ms embedding deadline, not the endpoint's 2 s
        body = await recall(cortex, "deploys")
        assert body["mode"] == "fulltext" and "query not embedded" in body["degraded"]
        assert body["results"][0]["id"] == late["id"]
        assert body["results"][0]["embedded"] is False  # recall says it lacks a vector

        async def write_failed() -> bool:  # the write-behind gave up at its deadline too
            metrics = (await cortex.call("GET", "/metrics")).text
            series = 'cortex_embedding_failures_total{stage="write"}'
            return series in metrics and metric(metrics, series) >= 1

        await await_until(write_failed, seconds=30)
        endpoint.delay_s = 0.0
        cortex.services.vectors.wake()

        async def embedded() -> bool:
            found = await recall(cortex, "deploys")
            return bool(found["mode"] == "hybrid" and found["results"][0]["embedded"])

        await await_until(embedded, seconds=30)


async def test_a_full_write_queue_leaves_the_rest_to_the_backfill(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    """Writes never wait for the write-behind embedder, not even when it is busy and its
    queue is full: what it could not take is embedded by the backfill, nothing is lost."""
    async with embed_server() as endpoint:
        cortex = await make_cortex(age_database.dsn, embedder=endpoint.url,
                                   embedding={"write_queue": 2})
        await await_until(lambda: _mode_is(cortex, "hybrid"), seconds=30)
        endpoint.delay_s = 0.6  # the first batch holds the embedder while the rest arrive
        started = time.monotonic()
        ids = [(await cortex.store("kb", f"{DEPLOY} ({i})"))["id"] for i in range(8)]
        assert time.monotonic() - started < 0.6 * 8 / 2  # no write waited for the embedder
        behind = (await capabilities(cortex))["write_behind"]
        assert behind["limit"] == 2 and behind["overflowed"] >= 1, behind
        endpoint.delay_s = 0.0
        await cortex.embedded_behind()
        cortex.services.vectors.wake()

        async def all_embedded() -> bool:
            with psycopg.connect(age_database.dsn) as conn:
                row = conn.execute("SELECT count(*) FROM memory_embeddings "
                                   "WHERE memory_id = ANY(%s)", (ids,)).fetchone()
            return row == (len(ids),)

        await await_until(all_embedded, seconds=30)
        body = await recall(cortex, "deploys freeze", limit=20)
        assert {r["id"] for r in body["results"]} == set(ids)
        assert all(r["embedded"] for r in body["results"])


async def test_a_start_with_nothing_stale_walks_no_memory(
    age_database: Database, make_cortex: MakeCortex, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that starts over vectors all current makes no backfill pass (a pass reads
    every live memory in windows: 1,563 round trips at 100k, while the first requests
    waited); a memory that turns stale is still found and embedded."""
    first = await make_cortex(age_database.dsn, embedding={"write_queue": 0})
    for text in (DEPLOY, *OTHERS):
        await first.store("kb", text)
    windows: list[int] = []
    walk = store_embeddings.stale

    async def counted(*args: Any, **kwargs: Any) -> Any:
        windows.append(1)
        return await walk(*args, **kwargs)

    monkeypatch.setattr(store_embeddings, "stale", counted)
    cortex = await make_cortex(age_database.dsn, migrated=False)
    caps = await await_until(lambda: _backfill_state(cortex, "idle"), seconds=30)
    assert caps["backfill"]["pending"] == 0 and windows == []
    with psycopg.connect(age_database.dsn, autocommit=True) as conn:  # one vector goes stale
        conn.execute("DELETE FROM memory_embeddings WHERE memory_id = "
                     "(SELECT id FROM memories WHERE content = %s)", (DEPLOY,))
    cortex.services.vectors.wake()

    async def embedded_again() -> bool:
        with psycopg.connect(age_database.dsn) as conn:
            row = conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()
        return row == (1 + len(OTHERS),)

    await await_until(embedded_again, seconds=30)
    assert windows  # that took a pass


async def test_write_queue_zero_embeds_inline(age_database: Database,
                                              make_cortex: MakeCortex) -> None:
    cortex = await make_cortex(age_database.dsn, embedding={"write_queue": 0})
    target = await cortex.store("kb", DEPLOY)
    await cortex.store("kb", OTHERS[0])
    body = await recall(cortex, "when do we stop shipping?")  # no wait: embedded on write
    assert body["results"][0]["id"] == target["id"] and body["results"][0]["embedded"] is True
    assert (await capabilities(cortex))["write_behind"] is None


async def _mode_is(cortex: CortexClient, mode: str) -> bool:
    return (await capabilities(cortex))["mode"] == mode


async def test_unreachable_endpoint_starts_fulltext(age_database: Database,
                                                    make_cortex: MakeCortex) -> None:
    async with embed_server() as endpoint:
        url = endpoint.url
    cortex = await make_cortex(age_database.dsn, embedder=url, embedding={"timeout_ms": 300})
    created = await cortex.store("kb", DEPLOY)  # stored although nothing embeds
    caps = await await_until(lambda: _backfill_state(cortex, "failing"), seconds=30)
    assert caps["mode"] == "fulltext" and "first answer" in caps["reason"]
    assert "unreachable" in caps["backfill"]["last_error"]
    body = await recall(cortex, "deploys")
    assert body["mode"] == "fulltext" and body["results"][0]["id"] == created["id"]


async def _backfill_state(cortex: CortexClient, state: str) -> dict[str, Any] | None:
    caps = await capabilities(cortex)
    return caps if caps["backfill"] and caps["backfill"]["state"] == state else None


async def test_endpoint_changing_dimension_is_an_error(age_database: Database,
                                                       make_cortex: MakeCortex) -> None:
    async with embed_server() as endpoint:
        cortex = await make_cortex(age_database.dsn, embedder=endpoint.url)
        await await_until(lambda: _mode_is(cortex, "hybrid"), seconds=30)
        endpoint.dimension = 8
        await cortex.store("kb", DEPLOY)
        cortex.services.vectors.wake()
        caps = await await_until(lambda: _backfill_state(cortex, "failing"), seconds=30)
        assert "8-dimension vectors; this server expects 16" in caps["backfill"]["last_error"]


# -- model change and backfill ----------------------------------------------------------------

async def test_model_change_re_embeds_in_the_background(age_database: Database,
                                                        make_cortex: MakeCortex) -> None:
    first = await make_cortex(age_database.dsn)
    ids = [(await first.store("kb", f"{text} ({i})"))["id"]
           for i in range(10) for text in (DEPLOY, *OTHERS)]
    # the first server's write-behind must be done, or (on a loaded machine) it writes its
    # model's vectors over the second server's after the second's backfill has finished
    await first.embedded_behind()
    async with embed_server() as endpoint:
        second = await make_cortex(age_database.dsn, embedder=endpoint.url,
                                   embedding={"backfill_batch": 7})

        async def done() -> dict[str, Any] | None:
            caps = await capabilities(second)
            b = caps["backfill"]
            return caps if b["pending"] == 0 and b["embedded"] >= len(ids) else None

        caps = await await_until(done, seconds=30)
        assert caps["backfill"]["state"] in ("idle", "running")
        metrics = (await second.call("GET", "/metrics")).text
        assert metric(metrics, "cortex_embedding_backfilled_total") >= len(ids)
        assert metric(metrics, "cortex_embedding_backfill_pending") == 0
        with psycopg.connect(age_database.dsn) as conn:
            rows = conn.execute("SELECT model, dim, count(*) FROM memory_embeddings "
                                "GROUP BY 1, 2").fetchall()
        assert rows == [("concepts-test", 16, len(ids))]
        assert max(len(t) for t in endpoint.texts) > 0
        body = await recall(second, "when do we stop shipping")
        assert body["mode"] == "hybrid" and "Deploys" in body["results"][0]["content"]


async def test_a_new_embedded_model_re_embeds_while_full_text_still_answers(
        age_database: Database, make_cortex: MakeCortex) -> None:
    """The embedded model changed (the default wordllama to MiniLM: docs/adr/0042; the same
    holds when MiniLM becomes the default): the new server's backfill re-embeds every memory,
    with progress in capabilities, and recall answers from the full-text half of what is not
    re-embedded yet."""
    first = await make_cortex(age_database.dsn)
    ids = [(await first.store("kb", f"{text} ({i})"))["id"]
           for i in range(6) for text in (DEPLOY, *OTHERS)]
    await first.embedded_behind()
    second = await make_cortex(age_database.dsn, embedder="minilm",
                               embedding={"backfill_batch": 5})
    early = await recall(second, "Deploys freeze Fridays")
    assert early["results"] and all("Deploys" in r["content"] for r in early["results"][:6])

    async def done() -> dict[str, Any] | None:
        caps = await capabilities(second)
        return caps if caps["backfill"]["pending"] == 0 else None

    caps = await await_until(done, seconds=60)
    assert caps["backfill"]["embedded"] >= len(ids)
    with psycopg.connect(age_database.dsn) as conn:
        rows = conn.execute("SELECT model, dim, count(*) FROM memory_embeddings "
                            "GROUP BY 1, 2").fetchall()
    assert rows == [(minilm.MODEL, minilm.DIMENSION, len(ids))]
    body = await recall(second, "when can't we ship?")
    assert body["mode"] == "hybrid" and "Deploys" in body["results"][0]["content"]
    assert all(r["embedded"] is True for r in body["results"])


# -- databases without pgvector ---------------------------------------------------------------

async def test_pg15_without_pgvector_is_fulltext(cortex: CortexClient) -> None:
    await cortex.store("kb", DEPLOY)
    body = await recall(cortex, "deploys")
    assert body["mode"] == "fulltext" and len(body["results"]) == 1
    assert "embedded" not in body["results"][0]
    caps = await capabilities(cortex)
    assert caps["mode"] == "fulltext" and caps["vector_extension"] is False
    assert "pgvector" in caps["reason"] and caps["embedder"] is None
    reply = await cortex.call("POST", "/v1/memories",
                              {"namespace": "kb", "content": "x", "embedding": [1.0, 2.0]})
    assert reply.status == 400


async def test_role_that_cannot_create_pgvector_migrates_fulltext_then_gains_it(
    age_database: Database, make_cortex: MakeCortex,
) -> None:
    # age_database is requested first, so it is dropped after make_cortex closed its servers
    database, server = age_database, age_database.server
    with psycopg.connect(server.admin_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
            sql.Identifier(database.name), sql.Identifier(APP_ROLE)))
    with psycopg.connect(database.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION age")  # AGE itself needs a superuser as well
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA ag_catalog TO {}").format(
            sql.Identifier(APP_ROLE)))
        conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA ag_catalog TO {}").format(
            sql.Identifier(APP_ROLE)))
    report = await migrate(database.app_dsn, graph=False)
    assert report.after == MAX_SUPPORTED_SCHEMA and report.vectors is False
    cortex = await make_cortex(database.app_dsn, migrated=False)
    memory = await cortex.store("kb", DEPLOY)
    caps = await capabilities(cortex)
    assert caps["mode"] == "fulltext" and caps["vector_extension"] is False
    assert (await recall(cortex, "deploys"))["results"][0]["id"] == memory["id"]

    report = await migrate(database.dsn, graph=False, app_role=APP_ROLE)
    assert report.applied == () and report.vectors is True
    again = await make_cortex(database.app_dsn, migrated=False)

    async def embedded() -> bool:
        return (await capabilities(again))["backfill"]["pending"] == 0

    await await_until(embedded, seconds=30)
    first = (await recall(again, "when do we stop shipping?"))["results"][0]
    assert first["id"] == memory["id"] and first["embedded"] is True


async def test_bad_embedder_setting_stops_start_up(age_database: Database,
                                                   make_cortex: MakeCortex) -> None:
    from attested_cortex.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="use minilm, static, default, onnx, none, client"):
        await make_cortex(age_database.dsn, embedder="bogus")
    with pytest.raises(InvalidInputError, match=r"embedding\.model and embedding\.dimension"):
        await make_cortex(age_database.dsn, embedder="client")


async def test_scopes_filter_vector_hits(age_database: Database, make_cortex: MakeCortex,
                                         tmp_path: Path) -> None:
    """A vector-only hit in a namespace the token may not read never reaches the answer
    (the read isolation of issue 12 applies after the fusion)."""
    tokens = {}
    lines = []
    for name, granted in {"writer": "", "reader": "memory.read:team-a/**"}.items():
        token, digest = generate()
        tokens[name] = token
        lines.append(f"{digest} {name} {granted}".strip())
    (tmp_path / "tokens").write_text("\n".join(lines) + "\n")
    cortex = await make_cortex(age_database.dsn, auth=TokenAuth.from_file(tmp_path / "tokens"))

    async def as_(who: str, method: str, path: str, body: Any) -> Any:
        reply = await cortex.call(method, path, body, agent=None,
                                  headers={"Authorization": f"Bearer {tokens[who]}"})
        assert reply.status in (200, 201), reply.text
        return reply.body

    hidden = await as_("writer", "POST", "/v1/memories", {"namespace": "team-b", "content": DEPLOY})
    mine = [await as_("writer", "POST", "/v1/memories", {"namespace": "team-a", "content": text})
            for text in OTHERS]
    await cortex.embedded_behind(agent=None,
                                 headers={"Authorization": f"Bearer {tokens['writer']}"})
    query = {"query": "when do we stop shipping?", "explain": True}
    everything = await as_("writer", "POST", "/v1/recall", query)
    assert everything["mode"] == "hybrid"
    assert everything["results"][0]["id"] == hidden["id"]  # found by its vector alone
    scoped = await as_("reader", "POST", "/v1/recall", query)
    assert scoped["mode"] == "hybrid"
    assert {r["id"] for r in scoped["results"]} <= {m["id"] for m in mine}
    assert hidden["id"] not in str(scoped) and "Fridays" not in str(scoped)
