"""Quotas through HTTP: the per-agent token bucket (429 + Retry-After, refill) and the
global stored-bytes cap (shared by two servers on one database)."""

from __future__ import annotations

from hack.support.waiting import await_until

from attested_cortex.policy.quotas import Buckets
from tests.server.test_hooks_api import count_memories
from tests.support.cortex import MakeCortex


def test_bucket_spends_refills_and_names_the_wait() -> None:
    buckets = Buckets(rate=2.0, overrides={"vip": 10.0})
    assert [buckets.take("a", now=0.0) for _ in range(3)] == [0, 0, 1]
    assert buckets.take("a", now=0.5) == 0  # half a second refills one token
    assert buckets.take("a", now=0.5) == 1
    assert all(buckets.take("vip", now=0.0) == 0 for _ in range(10))
    assert buckets.take("b", now=0.0) == 0  # agents do not share a bucket


async def test_rate_quota_is_429_with_retry_after_then_refills(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"requests_per_second": 3})
    statuses = [(await client.call("POST", "/v1/recall", {"query": "x"})) for _ in range(6)]
    limited = [r for r in statuses if r.status == 429]
    assert limited, [r.status for r in statuses]
    assert int(limited[0].headers["Retry-After"]) >= 1
    assert limited[0].body["error"]["details"]["limit"] == "requests_per_second"
    other = await client.call("POST", "/v1/recall", {"query": "x"}, agent="dev:other")
    assert other.status == 200  # per agent
    async def refilled() -> bool:
        return (await client.call("GET", "/v1/capabilities")).status != 429

    await await_until(refilled, what="the bucket to refill", seconds=5, interval_s=0.1)


async def test_storage_cap_is_global_and_names_the_limit(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    quotas = {"storage_per_agent_bytes": 100, "enabled": False}
    one = await make_cortex(migrated_pg15_dsn, migrated=False, quotas=quotas)
    two = await make_cortex(migrated_pg15_dsn, migrated=False, quotas=quotas)
    await one.store("n", "x" * 60)  # 61 bytes: the namespace and the content
    refused = await two.call("POST", "/v1/memories", {"namespace": "n", "content": "y" * 60})
    assert refused.status == 413, refused.text
    error = refused.body["error"]
    assert error["code"] == "storage_quota_exceeded" and error["details"]["limit"] == 100
    assert "storage_per_agent_bytes" in error["message"]
    assert count_memories(migrated_pg15_dsn) == 1
    other = await two.call("POST", "/v1/memories", {"namespace": "n", "content": "y" * 60},
                           agent="dev:other")
    assert other.status == 201
    first = (await one.call("GET", "/v1/memories?namespace=n")).body["memories"]
    mine = next(m for m in first if m["author"] == "dev:tester")
    assert (await two.call("DELETE", f"/v1/memories/{mine['id']}")).status == 200
    await two.store("n", "y" * 60)  # a delete frees the space
