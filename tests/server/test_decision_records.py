"""Every refusal reaches the audit chain, over HTTP and over MCP (issue 40): a scope denial,
a trust-tier denial (a tier's ceiling, a tier above the credential, a scope wider than
held), a rule's Deny and an AskUser hold each append a ``policy.*`` statement signed by the
audit signer. The refusals made at authentication (before any operation runs) were missing.
Approval decisions and expiries: tests/server/test_approvals_api.py (the same recorder
serves ``approval_decide`` over MCP)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attested_cortex.attest import decoding as cbor
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import HELLO, error
from tests.server.test_permissions_api import deny_rule
from tests.server.test_pipeline import signer_settings
from tests.support.cortex import CortexClient, MakeCortex

SIGNER = "cortex:audit"
ACCEPT = {"Accept": "application/json, text/event-stream"}


async def policy_records(cortex: CortexClient) -> list[dict[str, Any]]:
    """The decoded ``policy.*`` statements, each with its event type and signer."""
    async with cortex.services.db.connection() as conn:
        cur = await conn.execute(
            "SELECT agent_id, event_type, payload, signature FROM signed_events "
            "WHERE event_type LIKE 'policy.%' ORDER BY sequence")
        rows = await cur.fetchall()
    assert all(r["agent_id"] == SIGNER and r["signature"] is not None for r in rows)
    return [{**cbor.decode(bytes(r["payload"])), "event_type": r["event_type"]} for r in rows]


def seen(records: list[dict[str, Any]], actor: str) -> set[tuple[str, str, str]]:
    return {(r["verdict"], r["source"], r["operation"]) for r in records if r["actor"] == actor}


async def refuse_everything(cortex: CortexClient, agent: str) -> None:
    """Over HTTP as ``agent``: one request refused for each reason."""
    async def call(path: str, body: Any = None, **headers: str) -> int:
        reply = await cortex.call("POST" if body is not None else "GET", path, body,
                                  agent=agent, headers=headers)
        return reply.status

    memory = {"namespace": "kb", "content": "x"}
    assert await call("/v1/memories", memory, **{"X-Cortex-Scopes": "memory.read"}) == 403
    assert await call("/v1/memories", memory, **{"X-Cortex-Trust-Tier": "Untrusted"}) == 403
    assert await call("/v1/memories?namespace=kb", **{"X-Cortex-Trust-Tier": "Kernel"}) == 403
    assert await call("/v1/memories?namespace=kb",
                      **{"X-Cortex-Scopes": "memory.read memory.override"}) == 403
    assert await call("/v1/memories", {"namespace": "secret/k", "content": "x"}) == 403
    assert await call("/v1/memories", {"namespace": "held/x", "content": "x"}) == 202


async def test_every_refusal_is_chained_over_http_and_mcp(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    settings = signer_settings(tmp_path)
    settings["permissions"]["rules"].append(deny_rule())
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, **settings)
    await refuse_everything(cortex, "dev:http")

    memory = {"namespace": "kb", "content": "x"}
    async with mcp_client(cortex, agent="dev:mcp",
                          headers={"X-Cortex-Scopes": "memory.read"}) as client:
        assert error(await client.call_tool("memory_store", memory))["status"] == 403
    async with mcp_client(cortex, agent="dev:mcp",
                          headers={"X-Cortex-Trust-Tier": "Untrusted"}) as client:
        assert error(await client.call_tool("memory_store", memory))["status"] == 403
    async with mcp_client(cortex, agent="dev:mcp") as client:
        secret = {"namespace": "secret/k", "content": "x"}
        assert error(await client.call_tool("memory_store", secret))["status"] == 403
        held = {"namespace": "held/x", "content": "x"}
        assert error(await client.call_tool("memory_store", held))["status"] == 202
    for header in ({"X-Cortex-Trust-Tier": "Kernel"},
                   {"X-Cortex-Scopes": "memory.read memory.override"}):
        opened = await cortex.call("POST", "/mcp", HELLO, agent="dev:mcp",
                                   headers={**ACCEPT, **header})
        assert opened.status == 403, opened.text

    records = await policy_records(cortex)
    for actor, entry in (("dev:http", "GET /v1/memories"), ("dev:mcp", "POST /mcp")):
        found = seen(records, actor)
        assert ("deny", "scope_denied", "memory.store") in found, found
        assert ("deny", "trust_ceiling", "memory.store") in found, found  # the tier's ceiling
        assert ("deny", "trust_ceiling", entry) in found, found  # a tier above the credential
        assert ("deny", "scope_widening", entry) in found, found
        assert ("deny", "rule:prod/no-secrets", "memory.store") in found, found
        assert ("ask_user", "rule:t/held", "memory.store") in found, found
    entry_records = [r for r in records if r["operation"].endswith(("/memories", "/mcp"))]
    assert all(r["event_type"] == "policy.enforced" and r["trust_tier"] for r in entry_records)
    report = await cortex.call("GET", "/v1/audit/verify")
    assert report.status == 200 and report.body["ok"], report.body


async def test_refusals_at_the_door_take_the_rate_quota(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Each recorded refusal appends a signed event: a caller over its rate gets 429 and
    appends nothing, so bad headers cannot grow the chain faster than the caller's rate."""
    settings = signer_settings(tmp_path)
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               quotas={"requests_per_second": 3}, **settings)
    statuses = [(await cortex.call("GET", "/v1/memories", agent="dev:loud",
                                   headers={"X-Cortex-Trust-Tier": "Kernel"})).status
                for _ in range(12)]
    assert 429 in statuses and 403 in statuses, statuses
    records = [r for r in await policy_records(cortex) if r["actor"] == "dev:loud"]
    assert len(records) == statuses.count(403), (records, statuses)
