"""Webhook delivery (issue 41 items 2-4, ADR 0106/0107) from a real server on PostgreSQL to
real receivers on loopback (explicitly allowed), each delivery verified by the Standard
Webhooks reference library. A short retry schedule stands in for 1 s, 5 s, 25 s (the schedule
is a setting). About 6 s."""

from __future__ import annotations

from typing import Any

from hack.support.waiting import await_until

from tests.subscriptions.receivers import Receiver, receiving
from tests.support.cortex import CortexClient, MakeCortex

FAST = {"retry_schedule_seconds": [0.05, 0.1, 0.2], "retry_cap_seconds": 0.2,
        "max_attempts": 4, "total_timeout_ms": 400, "connect_timeout_ms": 400}


async def cortex_with(make_cortex: MakeCortex, dsn: str, **more: Any) -> CortexClient:
    return await make_cortex(dsn, migrated=False, subscriptions={**FAST, **more})


async def subscribe(cortex: CortexClient, receiver: Receiver, name: str = "hook",
                    **more: Any) -> dict[str, Any]:
    reply = await cortex.call("POST", "/v1/subscriptions", {
        "name": name, "url": receiver.url, "events": ["*"], "allow_private_targets": True,
        **more})
    assert reply.status == 201, reply.text
    receiver.secret = reply.body["secret"]  # generated: shown this once
    return dict(reply.body)


async def status(cortex: CortexClient, name: str = "hook") -> dict[str, Any]:
    reply = await cortex.call("GET", f"/v1/subscriptions/{name}")
    assert reply.status == 200, reply.text
    return dict(reply.body["status"])


async def test_every_event_once_in_order_per_key_signed_and_filtered(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn)
    async with receiving() as receiver:
        await subscribe(cortex, receiver, namespaces=["team/**"], max_in_flight=3)
        ids = [(await cortex.store("team/a", f"m{i}"))["id"] for i in range(4)]
        await cortex.store("elsewhere", "not for this subscription")
        for round_ in range(3):
            for memory_id in ids:
                changed = await cortex.call("PATCH", f"/v1/memories/{memory_id}",
                                            {"content": f"r{round_}"})
                assert changed.status == 200, changed.text
        await await_until(lambda: len(receiver.accepted) >= 16, seconds=10,
                          what="16 deliveries")
        assert receiver.refused_signatures == 0
        assert len(set(receiver.ids())) == len(receiver.ids()) == 16
        chains = receiver.by_key()
        assert sorted(chains) == sorted(f"memory:{i}" for i in ids)
        for chain in chains.values():
            revisions = [d["body"]["data"]["revision"] for d in chain]
            assert revisions == [1, 2, 3, 4]  # in order per memory
            assert [d["body"]["type"] for d in chain] == ["post_store"] + ["post_update"] * 3
            assert all(d["id"] == f"evt_{d['body']['sequence']}" for d in chain)
        # the cursor moves after the last answer (in the delivery process, ADR 0142)
        state = await await_until(lambda: _caught_up(cortex), seconds=10,
                                  what="the cursor past the 16 deliveries")
        assert state["lag"] == 0 and state["delivered"] == 16 and state["dead_letters"] == 0
        capabilities = await cortex.call("GET", "/v1/capabilities")
        shown = capabilities.body["subscriptions"]["subscriptions"]
        assert shown[0]["name"] == "hook" and shown[0]["lag"] == 0
        assert "secret" not in str(capabilities.body["subscriptions"])


async def _caught_up(cortex: CortexClient) -> dict[str, Any] | None:
    state = await status(cortex)
    return state if state["lag"] == 0 else None


async def test_a_receiver_down_gets_every_event_once_in_order_when_back(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn, max_attempts=100)
    async with receiving("down") as receiver:
        await subscribe(cortex, receiver)
        memory = await cortex.store("t", "v1")
        for n in range(2, 6):
            await cortex.call("PATCH", f"/v1/memories/{memory['id']}", {"content": f"v{n}"})
        other = await cortex.store("t", "other")

        async def failing() -> bool:
            return receiver.attempts >= 6 and (await status(cortex))["last_failure_at"] is not None

        await await_until(failing, seconds=10, what="failed attempts while down")
        receiver.mode = "ok"
        await await_until(lambda: len(receiver.accepted) >= 6, seconds=10, what="catch-up")
        chains = receiver.by_key()
        assert [d["body"]["data"]["revision"] for d in chains[f"memory:{memory['id']}"]] \
            == [1, 2, 3, 4, 5]
        assert len(chains[f"memory:{other['id']}"]) == 1
        assert len(set(receiver.ids())) == 6  # each accepted once
        assert (await status(cortex))["dead_letters"] == 0


async def test_dead_letters_are_listed_inspected_replayed_and_purged(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn)
    async with receiving("down") as receiver:
        await subscribe(cortex, receiver)
        stored = [await cortex.store("t", f"m{i}") for i in range(3)]

        async def buried() -> Any:
            listed = await cortex.call("GET", "/v1/subscriptions/hook/dead-letters")
            return len(listed.body["dead_letters"]) == 3 and listed.body

        page = await await_until(buried, seconds=10, what="three dead letters")
        assert all(d["attempts"] == 4 and d["last_error"] == "HTTP 503"
                   for d in page["dead_letters"])
        assert receiver.attempts == 12  # 1 + 3 retries each, then the queue
        first = page["dead_letters"][0]["sequence"]
        one = await cortex.call("GET", f"/v1/subscriptions/hook/dead-letters/{first}")
        assert one.status == 200 and one.body["payload"]["id"] == stored[0]["id"]

        receiver.mode = "ok"
        again = await cortex.call("POST", "/v1/subscriptions/hook/dead-letters/replay",
                                  {"sequence": first})
        assert again.body == {"delivered": [first], "failed": []}
        rest = await cortex.call("POST", "/v1/subscriptions/hook/dead-letters/replay", {})
        assert len(rest.body["delivered"]) == 2
        assert [d["body"]["data"]["id"] for d in receiver.accepted] == [
            s["id"] for s in stored]
        assert (await status(cortex))["dead_letters"] == 0

        receiver.mode = "down"
        await cortex.store("t", "late")
        await await_until(lambda: receiver.attempts >= 16, seconds=10, what="4 attempts")

        async def one_dead() -> bool:
            return (await status(cortex))["dead_letters"] == 1

        await await_until(one_dead, seconds=10, what="the late one buried")
        purged = await cortex.call("DELETE", "/v1/subscriptions/hook/dead-letters")
        assert purged.body == {"purged": 1}

        receiver.mode = "ok"  # a receiver that lost its state asks for everything again
        replay = await cortex.call("POST", "/v1/subscriptions/hook/replay",
                                   {"from_sequence": first})
        assert replay.status == 200, replay.text
        await await_until(lambda: len(receiver.accepted) >= 7, seconds=10, what="replayed")
        assert receiver.ids()[3:] == [f"evt_{first + i}" for i in range(4)]  # the same ids


async def test_private_targets_are_refused_unless_allowed(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn)
    for url in ("http://127.0.0.1:9/h", "http://localhost:9/h", "http://169.254.169.254/x",
                "http://10.1.2.3/h", "http://[::1]:9/h", "http://100.64.0.1/h",
                "http://[::ffff:127.0.0.1]/h"):
        reply = await cortex.call("POST", "/v1/subscriptions",
                                  {"name": "x", "url": url, "events": ["post_store"]})
        assert reply.status == 400, (url, reply.text)
        assert reply.body["error"]["code"] == "target_refused", url
    for url in ("ftp://example.com/h", "http://user:pw@example.com/h", "not a url"):
        reply = await cortex.call("POST", "/v1/subscriptions",
                                  {"name": "x", "url": url, "events": ["post_store"]})
        assert reply.status == 400, (url, reply.text)
    async with receiving() as receiver, receiving() as inside:
        made = await subscribe(cortex, receiver)
        assert made["allow_private_targets"] is True
        # switching the exception off again: refused at once, the target is loopback
        off = await cortex.call("PATCH", "/v1/subscriptions/hook",
                                {"allow_private_targets": False})
        assert off.status == 400 and off.body["error"]["code"] == "target_refused"
        # a redirect is not followed (to a receiver that would accept it)
        inside.secret = receiver.secret
        receiver.mode, receiver.redirect_to = "redirect", inside.url
        await cortex.store("t", "redirected")
        await await_until(lambda: receiver.attempts >= 4, seconds=10, what="4 attempts")
        assert inside.attempts == 0
        assert (await status(cortex))["last_error"] == "HTTP 307"


async def test_a_hanging_receiver_holds_only_its_own_slots(
        make_cortex: MakeCortex, migrated_pg15_dsn: str) -> None:
    cortex = await cortex_with(make_cortex, migrated_pg15_dsn, total_timeout_ms=2000,
                               max_attempts=100)
    async with receiving("hang") as stuck, receiving() as healthy:
        await subscribe(cortex, stuck, name="stuck", max_in_flight=2)
        await subscribe(cortex, healthy, name="healthy")
        for i in range(10):
            await cortex.store("t", f"m{i}")
        await await_until(lambda: len(healthy.accepted) >= 10, seconds=5,
                          what="the healthy subscription's deliveries")
        assert stuck.most_in_flight <= 2  # its max_in_flight, never more
        assert (await status(cortex, "stuck"))["delivered"] == 0
