"""Recall over HTTP: relevance, namespace proximity, limits, budget, determinism."""

from tests.support.cortex import CortexClient


async def test_relevant_memory_ranks_first(cortex: CortexClient) -> None:
    await cortex.store("kb", "The cafeteria serves lunch at noon")
    target = await cortex.store("kb", "Rotate the database password every ninety days",
                                title="database password rotation")
    await cortex.store("kb", "The database is PostgreSQL")
    reply = await cortex.call("POST", "/v1/recall", {"query": "database password rotation"})
    assert reply.status == 200
    assert reply.body["results"][0]["id"] == target["id"]
    assert "lunch" not in reply.body["results"][0]["content"]


async def test_nearer_namespace_ranks_higher_and_siblings_are_not_searched(
    cortex: CortexClient,
) -> None:
    far = await cortex.store("org", "incident runbook for the payment service")
    near = await cortex.store("org/payments", "incident runbook for the payment service")
    await cortex.store("org/search", "incident runbook for the payment service")
    reply = await cortex.call("POST", "/v1/recall",
                              {"query": "incident runbook", "namespace": "org/payments/api"})
    assert [r["id"] for r in reply.body["results"]] == [near["id"], far["id"]]


async def test_or_relaxation_when_and_finds_too_little(cortex: CortexClient) -> None:
    only = await cortex.store("kb", "kubernetes operators reconcile state")
    reply = await cortex.call("POST", "/v1/recall", {"query": "kubernetes bananas"})
    assert [r["id"] for r in reply.body["results"]] == [only["id"]]


async def test_limit_and_deterministic_order(cortex: CortexClient) -> None:
    for i in range(6):
        await cortex.store("kb", f"identical text about graphs {i % 2}")
    first = await cortex.call("POST", "/v1/recall", {"query": "graphs", "limit": 4})
    second = await cortex.call("POST", "/v1/recall", {"query": "graphs", "limit": 4})
    assert len(first.body["results"]) == 4
    assert [r["id"] for r in first.body["results"]] == [r["id"] for r in second.body["results"]]
    scores = [r["score"] for r in first.body["results"]]
    assert scores == sorted(scores, reverse=True)


async def test_budget_truncates(cortex: CortexClient) -> None:
    await cortex.store("kb", "alpha " * 200)
    small = await cortex.store("kb", "alpha beta")
    reply = await cortex.call("POST", "/v1/recall", {"query": "alpha", "budget_tokens": 10})
    assert reply.body["truncated"] is True
    assert [r["id"] for r in reply.body["results"]] == [small["id"]]
    assert reply.body["tokens"] <= 10


async def test_stop_words_only_find_nothing(cortex: CortexClient) -> None:
    await cortex.store("kb", "the and of")
    reply = await cortex.call("POST", "/v1/recall", {"query": "the"})
    assert reply.status == 200 and reply.body["results"] == []
