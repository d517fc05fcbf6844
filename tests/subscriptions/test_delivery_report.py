"""The public delivery report (``GET /v1/delivery-report``, ADR 0130) that the operator reads
for CortexSubscription status: served without credentials, each subscription's lag, last
success and failure, dead letters, and the failure's class only (no URL, host, secret or
payload), read from a real server delivering to a receiver that answers 503 and to a closed
port. The operator's builder reads it as Delivering=False DeliveryFailing. About 2 s."""

from __future__ import annotations

from typing import Any

from hack.support.waiting import await_until

from attested_cortex.builders.deliverystates import delivery
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import cortex_with, subscribe
from tests.support.cortex import CortexClient, MakeCortex


async def report(cortex: CortexClient) -> dict[str, Any]:
    reply = await cortex.call("GET", "/v1/delivery-report", agent=None)  # no identity
    assert reply.status == 200, reply.text
    return dict(reply.body)


def item(found: dict[str, Any], name: str) -> dict[str, Any]:
    return next(dict(s) for s in found["subscriptions"] if s["name"] == name)


async def test_the_report_is_public_and_says_only_the_failure_class(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn, max_attempts=100)
    assert (await cortex.call("GET", "/v1/capabilities", agent=None)).status == 401
    async with receiving("down") as receiver:
        made = await subscribe(cortex, receiver, name="down")
        closed = await cortex.call("POST", "/v1/subscriptions", {
            "name": "closed", "url": "http://127.0.0.1:9/hook?token=abc", "events": ["*"],
            "allow_private_targets": True})
        assert closed.status == 201, closed.text
        await cortex.store("t", "an event for both")

        async def both_failed() -> bool:
            found = await report(cortex)
            return all(item(found, n)["last_failure_at"] for n in ("down", "closed"))

        await await_until(both_failed, seconds=10, what="both subscriptions failing")
        found = await report(cortex)
    down, refused = item(found, "down"), item(found, "closed")
    assert down["last_error"] == "HTTP 503" and down["lag"] >= 1
    assert refused["last_error"] == "connection failed (ClientConnectorError)"
    assert down["last_success_at"] is None and down["dead_letters"] == 0
    text = str(found)
    for secret in ("127.0.0.1", "token=abc", receiver.url, made["secret"],
                   closed.body["secret"], "an event for both"):
        assert secret not in text
    shown, observed = delivery(found, "down")
    assert observed.reason == "DeliveryFailing" and shown and shown["lastError"] == "HTTP 503"
