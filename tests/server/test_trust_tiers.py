"""Trust tiers (ADR 0049): the tier x scope x qualified/unqualified matrix, over HTTP and MCP.

One real server on real PostgreSQL with ``--auth tokens``: each agent has a Trusted token
(to set up its own memory) and a tiered one carrying the scopes under test, so the tier is
the credential's, not the agent's. Each cell is written out by hand from the seed's table
(``ok``; ``TC``: 403 ``trust_ceiling`` naming tier, scope and mark; ``SD``: 403
``scope_denied``, the scope is not held at all), and each row's capabilities show the
effective scopes. Then: Kernel is refused, ``X-Cortex-Trust-Tier`` only lowers, a
refusal is recorded with the tier and effective scopes, and a ceiling override from the
settings (what a MemoryCortex ``spec.trust.ceilings`` renders) moves a cell.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from attested_cortex.errors import InvalidInputError
from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import error, ok
from tests.server.test_pipeline import SECRET
from tests.support.cortex import CortexClient, MakeCortex, Reply

#: agent -> (tier, held scopes of its tiered token; "" is every scope but memory.override)
ROWS: dict[str, tuple[str, str]] = {
    "t": ("Trusted", ""),
    "s": ("SemiTrusted", ""),
    "sq": ("SemiTrusted", "memory.read,memory.write,memory.forget:proj/**,audit.read:proj/**,"
                          "graph.read"),
    "u": ("Untrusted", ""),
    "uq": ("Untrusted", "memory.read:public/**,audit.read:public/**,memory.write:public/**"),
    "uw": ("Untrusted", "memory.read:**"),
    # issue 37 item 4: a whole-cortex pattern is bare, not a qualifier
    "sw": ("SemiTrusted", "memory.read,memory.write,memory.forget:**,audit.read:*/**"),
}
OPS = ("read_proj", "read_public", "write", "forget", "graph", "audit", "approvals")
#: The expected answer of each (agent, operation), from seed 003's table.
MATRIX: dict[str, tuple[str, ...]] = {
    "t": ("ok", "ok", "ok", "ok", "ok", "ok", "ok"),
    "s": ("ok", "ok", "ok", "TC", "TC", "TC", "TC"),
    "sq": ("ok", "ok", "ok", "ok", "TC", "ok", "SD"),
    "u": ("TC", "TC", "TC", "TC", "TC", "TC", "TC"),
    "uq": ("SD", "ok", "TC", "SD", "SD", "ok", "SD"),
    "uw": ("TC", "TC", "SD", "SD", "SD", "SD", "SD"),
    "sw": ("ok", "ok", "ok", "TC", "SD", "TC", "SD"),
}
#: The base each operation needs, and the mark a refusal names for the tier.
BASE = {"read_proj": "memory.read", "read_public": "memory.read", "write": "memory.write",
        "forget": "memory.forget", "graph": "graph.read", "audit": "audit.read",
        "approvals": "approvals.decide"}
MARKS = {("SemiTrusted", "memory.forget"): "qualified", ("SemiTrusted", "graph.read"): "denied",
         ("SemiTrusted", "audit.read"): "qualified",
         ("SemiTrusted", "approvals.decide"): "denied",
         ("Untrusted", "memory.read"): "qualified:public/**",
         ("Untrusted", "audit.read"): "qualified:public/**"}
#: Effective scopes the capabilities show for each tiered token.
EFFECTIVE = {
    "t": ["approvals.decide", "audit.read", "graph.read", "graph.write", "memory.forget",
          "memory.read", "memory.write", "subscriptions.manage"],
    "s": ["memory.read", "memory.write"],
    "sq": ["audit.read:proj/**", "memory.forget:proj/**", "memory.read", "memory.write"],
    "u": [], "uq": ["audit.read:public/**", "memory.read:public/**"], "uw": [],
    "sw": ["memory.read", "memory.write"],
}


class Team:
    """The server, and each agent's setup (Trusted) and tiered tokens."""

    def __init__(self, client: CortexClient, setup: dict[str, str], tiered: dict[str, str]):
        self.client, self.setup, self.tiered = client, setup, tiered

    async def call(self, token: str, method: str, path: str, body: Any = None,
                   **headers: str) -> Reply:
        return await self.client.call(method, path, body, agent=None, headers={
            "Authorization": f"Bearer {token}", **headers})

    async def store(self, who: str, namespace: str) -> str:
        reply = await self.call(self.setup[who], "POST", "/v1/memories",
                                {"namespace": namespace, "content": f"{who} in {namespace}"})
        assert reply.status == 201, reply.text
        return str(reply.body["id"])


async def team(make_cortex: MakeCortex, dsn: str, tmp_path: Path, **settings: Any) -> Team:
    lines, setup, tiered = [], {}, {}
    for name, (tier, held) in ROWS.items():
        token, digest = generate()
        setup[name] = token
        lines.append(f"{digest} {name}")  # no tier=: the default, Trusted
        token, digest = generate()
        tiered[name] = token
        lines.append(f"{digest} {name} {held} tier={tier}".replace("  ", " "))
    (tmp_path / "tokens").write_text("\n".join(lines) + "\n")
    client = await make_cortex(dsn, migrated=False, graph_backend="CTE",
                               auth=TokenAuth.from_file(tmp_path / "tokens"), **settings)
    return Team(client, setup, tiered)


def approval_secret(tmp_path: Path) -> Path:
    (tmp_path / "secret").write_bytes(SECRET)
    return tmp_path / "secret"


def check(who: str, op: str, expected: str, status: int, body: Any, via: str = "http") -> None:
    where = f"{via} {who} {op}: {status} {body}"
    if expected == "ok":
        assert status < 400, where
        return
    assert status == 403, where
    err = body["error"]
    if expected == "SD":
        assert err["code"] == "scope_denied", where
        return
    tier, base = ROWS[who][0], BASE[op]
    assert err["code"] == "trust_ceiling", where
    assert err["details"]["tier"] == tier and err["details"]["scope"] == base, where
    assert err["details"]["mark"] == MARKS.get((tier, base), "denied"), where


async def test_the_matrix_over_http_and_mcp(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crew = await team(make_cortex, migrated_pg15_dsn, tmp_path,
                      approval={"hmac_secret_file": approval_secret(tmp_path)})
    proj, public = await crew.store("t", "proj"), await crew.store("t", "public/news")
    for who in ROWS:
        caps = await crew.call(crew.tiered[who], "GET", "/v1/capabilities")
        you = caps.body["trust"]["you"]
        assert you["tier"] == ROWS[who][0] and you["effective_scopes"] == EFFECTIVE[who], who

        own = await crew.store(who, "proj")
        http = {
            "read_proj": ("GET", f"/v1/memories/{proj}", None),
            "read_public": ("GET", f"/v1/memories/{public}", None),
            "write": ("POST", "/v1/memories", {"namespace": "public/news", "content": "x"}),
            "forget": ("DELETE", f"/v1/memories/{own}", None),
            "graph": ("POST", "/v1/kg/query", {"start_id": proj, "depth": 1}),
            "audit": ("GET", "/v1/audit/verify", None),
            "approvals": ("GET", "/v1/approvals", None),
        }
        for op, expected in zip(OPS, MATRIX[who], strict=True):
            method, path, body = http[op]
            reply = await crew.call(crew.tiered[who], method, path, body)
            check(who, op, expected, reply.status, reply.body)

        own = await crew.store(who, "proj")
        tools = {
            "read_proj": ("memory_get", {"id": proj}),
            "read_public": ("memory_get", {"id": public}),
            "write": ("memory_store", {"namespace": "public/news", "content": "y"}),
            "forget": ("memory_forget", {"id": own}),
            "graph": ("kg_query", {"start_id": proj, "depth": 1}),
            "audit": ("audit_verify", {}),
            "approvals": ("approvals_list", {}),
        }
        headers = {"Authorization": f"Bearer {crew.tiered[who]}"}
        async with mcp_client(crew.client, headers=headers) as mcp:
            seen = ok(await mcp.call_tool("capabilities", {}))["trust"]["you"]
            assert seen["effective_scopes"] == EFFECTIVE[who], who
            for op, expected in zip(OPS, MATRIX[who], strict=True):
                name, arguments = tools[op]
                result = await mcp.call_tool(name, arguments)
                if result.is_error:
                    answer = error(result)
                    check(who, op, expected, answer["status"], answer, "mcp")
                else:
                    check(who, op, expected, 200, ok(result), "mcp")


async def test_kernel_lowering_audit_and_overrides(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "attested_cortex.policy")
    _, digest = generate()
    (tmp_path / "kernel").write_text(f"{digest} sneaky tier=Kernel\n")
    with pytest.raises(InvalidInputError, match="tier must be one of"):
        TokenAuth.from_file(tmp_path / "kernel")

    # what spec.trust.ceilings: {SemiTrusted: {graph.read: granted}} renders
    crew = await team(make_cortex, migrated_pg15_dsn, tmp_path,
                      trust={"ceilings": {"SemiTrusted": {"graph.read": "granted"}}})
    proj = await crew.store("t", "proj")
    graph = await crew.call(crew.tiered["s"], "POST", "/v1/kg/query",
                            {"start_id": proj, "depth": 1})
    assert graph.status == 200, graph.text
    caps = await crew.call(crew.tiered["s"], "GET", "/v1/capabilities")
    assert caps.body["trust"]["ceilings"]["SemiTrusted"]["graph.read"] == "granted"

    for raised in ("Kernel", "Trusted"):
        above = await crew.call(crew.tiered["s"], "GET", "/v1/capabilities",
                                **{"X-Cortex-Trust-Tier": raised})
        assert above.status == 403 and above.body["error"]["code"] == "trust_ceiling", raised
    lowered = await crew.call(crew.setup["t"], "GET", f"/v1/memories/{proj}",
                              **{"X-Cortex-Trust-Tier": "Untrusted"})
    assert lowered.status == 403 and lowered.body["error"]["details"]["tier"] == "Untrusted"

    refused = [r for r in caplog.records if getattr(r, "source", "") == "trust_ceiling"]
    seen = [(getattr(r, "trust_tier", None), getattr(r, "operation", None)) for r in refused]
    # the raised tiers are refused at authentication, before any operation: logged (and
    # chained) under their route (issue 40)
    assert seen == [("SemiTrusted", "GET /v1/capabilities")] * 2 + [("Untrusted", "memory.get")]
    assert getattr(refused[-1], "effective_scopes", None) == ""


async def test_a_qualified_audit_read_sees_the_chain_summary_only(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """Issue 37 item 5: ``audit.read:<pattern>`` covers some namespaces, not the cortex: no
    deep walk (over HTTP and MCP), no fault detail, no cortex export; the bare scope at a
    tier that allows it keeps all three."""
    crew = await team(make_cortex, migrated_pg15_dsn, tmp_path)
    await crew.store("t", "proj")
    for who, code in (("uq", "scope_denied"), ("sq", "scope_denied"), ("s", "trust_ceiling")):
        deep = await crew.call(crew.tiered[who], "GET", "/v1/audit/verify?deep=true")
        assert deep.status == 403 and deep.body["error"]["code"] == code, (who, deep.text)
        async with mcp_client(crew.client, headers={
                "Authorization": f"Bearer {crew.tiered[who]}"}) as mcp:
            result = await mcp.call_tool("audit_verify", {"deep": True})
            assert error(result)["error"]["code"] == code, who
    for who in ("uq", "sq"):
        chain = await crew.call(crew.tiered[who], "GET", "/v1/audit/verify")
        assert chain.status == 200 and chain.body["ok"] is True, chain.text
        assert chain.body["summary_only"] is True and "reason" not in chain.body
        assert set(chain.body["keyed"]) == {"checked", "ok"}
    exported = await crew.call(crew.tiered["sq"], "GET", "/v1/export")
    assert exported.status == 403 and exported.body["error"]["code"] == "scope_denied"
    full = await crew.call(crew.tiered["t"], "GET", "/v1/audit/verify?deep=true")
    assert full.status == 200 and full.body["deep"]["ok"] is True, full.text
    assert "summary_only" not in full.body
