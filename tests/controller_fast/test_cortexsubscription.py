"""CortexSubscription passes and their rendering (issue 41 item 5, ADR 0108): a generated
signing Secret made once (never replaced, never in status), a named Secret waited for, the
subscription rendered into the cortex's ``subscriptions.declared`` with its Secret in the
projected volume, in force once the serving pods run it, and an idle pass writes nothing."""

from __future__ import annotations

import base64

from attested_cortex.builders import names as n
from attested_cortex.builders.configmaps import SUBSCRIPTIONS_DIR
from tests.controller_fast.conftest import Operated, cortex, satellite
from tests.controller_fast.test_memorycortex_settings import config, pod_spec, roll

KIND = "CortexSubscription"


def subscription(name: str, **spec: object) -> dict[str, object]:
    return satellite(KIND, name, "mem", url="https://hooks.example.net/in",
                     events=["post_store", "post_link"], namespaces=["team/**"], **spec)


async def test_a_generated_secret_is_made_once_and_the_subscription_rendered(
        op: Operated) -> None:
    op.apply(cortex("mem"), subscription("archive"))
    await op.reconcile(KIND, "archive")
    secret = op.get("Secret", n.webhook_secret_name("archive"), "v1") or {}
    value = base64.b64decode(secret["data"]["secret"]).decode()
    assert value.startswith("whsec_") and len(base64.b64decode(value[6:])) == 32
    assert secret["metadata"]["ownerReferences"][0]["kind"] == KIND
    status = op.status(KIND, "archive")
    assert status["secretName"] == "archive-webhook" and value not in str(status)
    assert op.reasons(KIND, "archive")["Accepted"] == ("True", "SecretGenerated")
    await op.reconcile(KIND, "archive")  # never regenerated
    assert op.get("Secret", n.webhook_secret_name("archive"), "v1") == secret

    await roll(op)
    declared = config(op)["subscriptions"]["declared"]  # type: ignore[index]
    assert declared == [{"name": "archive", "url": "https://hooks.example.net/in",
                         "events": ["post_store", "post_link"], "namespaces": ["team/**"],
                         "max_in_flight": 4, "enabled": True, "allow_private_targets": False,
                         "secret_file": f"{SUBSCRIPTIONS_DIR}/archive"}]
    spec = pod_spec(op)
    volume = next(v for v in spec["volumes"] if v["name"] == "subscriptions")
    assert volume["projected"]["sources"] == [{"secret": {  # type: ignore[index]
        "name": "archive-webhook", "optional": True,
        "items": [{"key": "secret", "path": "archive"}]}}]
    await op.reconcile(KIND, "archive")
    assert op.reasons(KIND, "archive")["InForce"] == ("True", "Loaded")
    assert op.reasons(KIND, "archive")["Ready"] == ("True", "InForce")
    writes = op.writes()
    await op.reconcile(KIND, "archive")
    assert op.writes() == writes  # idle: nothing written


async def test_a_named_secret_is_waited_for_and_mounted_as_named(op: Operated) -> None:
    op.apply(cortex("mem"), subscription("mine", secretRef={"name": "my-webhook",
                                                          "key": "signing"}))
    assert await op.reconcile(KIND, "mine") is not None  # come back: the Secret is missing
    assert op.reasons(KIND, "mine")["Accepted"] == ("False", "SecretMissing")
    assert op.get("Secret", n.webhook_secret_name("mine"), "v1") is None  # none generated
    op.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "my-webhook", "namespace": "ns"}, "data": {"signing": "eA=="}})
    assert await op.reconcile(KIND, "mine") is None
    assert op.reasons(KIND, "mine")["Accepted"] == ("True", "SecretFound")
    await roll(op)
    volume = next(v for v in pod_spec(op)["volumes"] if v["name"] == "subscriptions")
    assert volume["projected"]["sources"][0]["secret"] == {  # type: ignore[index]
        "name": "my-webhook", "optional": True, "items": [{"key": "signing", "path": "mine"}]}
