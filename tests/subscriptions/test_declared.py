"""Subscriptions declared in the server's configuration (what the operator renders from
CortexSubscription resources, ADR 0108): synced into the table after start-up (never during
it), delivered like any other, their secret read from the mounted file at each sync (a
rotated Secret signs the next deliveries), shown as ``managed_by: config``. About 3 s."""

from __future__ import annotations

from pathlib import Path

from hack.support.waiting import await_until

from attested_cortex.service.workers.webhooks import new_secret
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST
from tests.support.cortex import MakeCortex


async def test_declared_subscriptions_are_synced_and_follow_their_secret(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    first, second = new_secret(), new_secret()
    secret = tmp_path / "secret"
    secret.write_text(first + "\n")
    async with receiving() as receiver:
        receiver.secret = first
        cortex = await make_cortex(migrated_pg15_dsn, migrated=False, subscriptions={
            **FAST, "max_attempts": 100, "declared": [{"name": "gitops", "url": receiver.url,
                                  "events": ["post_store"], "namespaces": ["team/**"],
                                  "secret_file": secret, "allow_private_targets": True}]})

        async def listed() -> bool:
            reply = await cortex.call("GET", "/v1/subscriptions/gitops")
            return reply.status == 200 and reply.body["managed_by"] == "config"

        await await_until(listed, seconds=10, what="the declared subscription synced")
        await cortex.store("team/a", "one")
        await cortex.store("other", "not for it")
        await await_until(lambda: len(receiver.accepted) == 1, seconds=10, what="delivery")

        secret.write_text(second)  # the Secret rotated: the next sync takes it
        receiver.secret = second

        await cortex.store("team/a", "two")

        def signed_anew() -> bool:
            return any(d["body"]["data"]["content"] == "two" for d in receiver.accepted)

        # the receiver now verifies with the new secret only: "two" is accepted once the
        # deliverer signs with it (a delivery signed with the old one is a 401, retried)
        await await_until(signed_anew, seconds=15, what="a delivery signed with the new secret")
