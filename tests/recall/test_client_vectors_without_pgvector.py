"""``--embedder client`` on a database without pgvector (issue 20, item 15): a store that
carries ``embedding`` was refused with "this server does not take client vectors (embedder:
none)" although the operator configured ``client``. The refusal now names the real cause
and the way out, and recall with a client vector answers by full text, as the docs say."""

from __future__ import annotations

from tests.support.cortex import MakeCortex

CLIENT = {"embedder": "client", "embedding": {"model": "client-test", "dimension": 3}}


async def test_client_vectors_without_pgvector_are_refused_with_the_true_reason(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, **CLIENT)
    stored = await cortex.call("POST", "/v1/memories", {
        "namespace": "kb", "content": "deploys freeze on fridays", "embedding": [1, 0, 0]})
    assert stored.status == 400
    message = stored.body["error"]["message"]
    assert "pgvector" in message and "embedder: none" not in message, message
    assert stored.body["error"]["details"]["field"] == "embedding"
    await cortex.store("kb", "deploys freeze on fridays")
    recall = await cortex.call("POST", "/v1/recall", {"query": "deploys",
                                                      "embedding": [1, 0, 0]})
    assert recall.status == 200 and recall.body["mode"] == "fulltext"
    assert [r["content"] for r in recall.body["results"]] == ["deploys freeze on fridays"]
