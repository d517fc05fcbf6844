"""The subscription MCP tools (issue 41 item 3) on a real server: the same operations as
``/v1/subscriptions``, through the same pipeline: create (the secret shown once), list, get,
update, dead letters listed, inspected, replayed and purged, replay from a sequence, delete;
a Trusted-only power (a SemiTrusted caller is refused by its tier's ceiling). About 2 s."""

from __future__ import annotations

import json
from typing import Any

from hack.support.waiting import await_until

from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import cortex_with
from tests.support.cortex import CortexClient, MakeCortex

ACCEPT = {"Accept": "application/json, text/event-stream"}


async def session(cortex: CortexClient, headers: dict[str, str] | None = None
                  ) -> dict[str, str]:
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    opened = await cortex.call("POST", "/mcp", hello, headers={**ACCEPT, **(headers or {})})
    assert opened.status == 200, opened.text
    found = {**ACCEPT, **(headers or {}), "Mcp-Session-Id": opened.headers["Mcp-Session-Id"],
             "MCP-Protocol-Version": "2025-11-25"}
    await cortex.call("POST", "/mcp", {"jsonrpc": "2.0",
                                       "method": "notifications/initialized"}, headers=found)
    return found


async def tool(cortex: CortexClient, headers: dict[str, str], name: str,
               arguments: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    reply = await cortex.call("POST", "/mcp", {
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}}, headers=headers)
    assert reply.status == 200, reply.text
    result = reply.body["result"]
    return not result.get("isError"), result["structuredContent"]


async def test_the_subscription_tools(make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn)
    mcp = await session(cortex)
    async with receiving("down") as receiver:
        ok, made = await tool(cortex, mcp, "subscription_create", {
            "name": "via-mcp", "url": receiver.url, "events": ["post_store"],
            "allow_private_targets": True})
        assert ok and made["secret"].startswith("whsec_"), made
        receiver.secret = made["secret"]
        ok, listed = await tool(cortex, mcp, "subscription_list", {})
        assert ok and "secret" not in json.dumps(listed)
        memory = await cortex.store("t", "to the queue")

        async def buried() -> Any:
            ok, page = await tool(cortex, mcp, "dead_letters_list", {"name": "via-mcp"})
            return ok and page["dead_letters"] and page

        page = await await_until(buried, seconds=10, what="a dead letter")
        seq = page["dead_letters"][0]["sequence"]
        ok, one = await tool(cortex, mcp, "dead_letter_get", {"name": "via-mcp",
                                                             "sequence": seq})
        assert ok and one["payload"]["id"] == memory["id"]
        receiver.mode = "ok"
        ok, replayed = await tool(cortex, mcp, "dead_letters_replay", {"name": "via-mcp"})
        assert ok and replayed == {"delivered": [seq], "failed": []}
        assert receiver.ids() == [f"evt_{seq}"]
        ok, purged = await tool(cortex, mcp, "dead_letters_purge", {"name": "via-mcp"})
        assert ok and purged == {"purged": 0}
        ok, _ = await tool(cortex, mcp, "subscription_replay", {"name": "via-mcp",
                                                                "from_sequence": seq})
        assert ok
        await await_until(lambda: len(receiver.accepted) == 2, seconds=10, what="replayed")
        ok, changed = await tool(cortex, mcp, "subscription_update", {"name": "via-mcp",
                                                                      "enabled": False})
        assert ok and changed["enabled"] is False
        lower = await session(cortex, {"X-Cortex-Trust-Tier": "SemiTrusted"})
        ok, refused = await tool(cortex, lower, "subscription_get", {"name": "via-mcp"})
        assert not ok and refused["error"]["code"] == "trust_ceiling", refused
        ok, gone = await tool(cortex, mcp, "subscription_delete", {"name": "via-mcp"})
        assert ok and gone == {"deleted": "via-mcp"}
