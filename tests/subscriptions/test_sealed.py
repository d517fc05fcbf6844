"""The outbox under ``encryption.at_rest`` (ADR 0106): event payloads are sealed under the
master key like the rows they describe (no plaintext in the table), and so is each
subscription's signing secret; events are delivered opened (signed with the opened secret)
and a dead letter's payload opens for inspection. About 2 s."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
from hack.support.waiting import await_until

from attested_cortex.attest import masterkeys as mk
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST, subscribe
from tests.support.cortex import MakeCortex


async def test_sealed_payloads_are_delivered_opened(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, master_key={"file": key},
                               encryption={"at_rest": True}, subscriptions=FAST)
    marker = f"secret-{uuid.uuid4().hex}"
    async with receiving("down") as receiver:
        await subscribe(cortex, receiver)
        stored = await cortex.store("t", marker)
        with psycopg.connect(migrated_pg15_dsn) as conn:
            text = conn.execute("SELECT payload::text FROM outbox_events").fetchall()
            kept = conn.execute("SELECT secret FROM subscriptions").fetchone()
        assert text and not any(marker in row[0] for row in text)  # sealed at rest
        assert kept is not None and kept[0].startswith("sealed:")  # and so is the secret
        assert receiver.secret not in kept[0]

        async def buried() -> list[dict[str, object]]:
            page = await cortex.call("GET", "/v1/subscriptions/hook/dead-letters")
            found: list[dict[str, object]] = page.body["dead_letters"]
            return found

        seq = (await await_until(buried, seconds=10, what="a dead letter"))[0]["sequence"]
        one = await cortex.call("GET", f"/v1/subscriptions/hook/dead-letters/{seq}")
        assert one.body["payload"]["content"] == marker  # opened for the operator
        receiver.mode = "ok"
        await cortex.call("POST", "/v1/subscriptions/hook/replay", {"from_sequence": seq})
        await await_until(lambda: receiver.accepted, seconds=10, what="the delivery")
        assert receiver.accepted[0]["body"]["data"] == stored  # opened for the receiver
