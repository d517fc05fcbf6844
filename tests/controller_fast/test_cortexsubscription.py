"""CortexSubscription passes and their rendering (issue 41 item 5, ADR 0108): a generated
signing Secret made once (never replaced, never in status), a named Secret waited for, the
subscription rendered into the cortex's ``subscriptions.declared`` with its Secret in the
projected volume, in force once the serving pods run it, and an idle pass writes nothing."""

from __future__ import annotations

import base64
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from attested_cortex import pki
from attested_cortex.builders import names as n
from attested_cortex.builders.configmaps import SUBSCRIPTIONS_DIR
from attested_cortex.controller.cortexsubscription import DELIVERY_POLL_S
from tests.controller_fast.conftest import Operated, cortex, satellite
from tests.controller_fast.test_memorycortex_settings import config, pod_spec, roll
from tests.controller_fast.test_memorycortex_tls import pem
from tests.controller_fast.test_memorycortex_tls import roll as roll_tls

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


def server_pod_runs(op: Operated, port: int, scheme: str = "http") -> None:
    """A serving pod of the cortex runs on 127.0.0.1 with the test's report server as its
    ``http`` port (as the Deployment controller and kubelet would make it)."""
    template = (op.get("Deployment", n.server_name("mem"), "apps/v1") or {})["spec"]["template"]
    spec = template["spec"]
    spec["containers"][0]["ports"] = [{"name": scheme, "containerPort": port}]
    op.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "mem-server-x", "labels": template["metadata"]["labels"]}, "spec": spec})
    op.set_status("v1", "Pod", "mem-server-x", {"phase": "Running", "podIP": "127.0.0.1"})


@asynccontextmanager
async def report_server(report: dict[str, Any], tls: ssl.SSLContext | None = None
                        ) -> AsyncIterator[int]:
    """The server's public delivery report on loopback, answering ``report`` as it is now
    (over TLS with ``tls``)."""
    async def answer(_: web.Request) -> web.Response:
        return web.json_response(report)

    app = web.Application()
    app.router.add_get("/v1/delivery-report", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=tls)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    finally:
        await runner.cleanup()


async def test_delivery_state_reaches_status_only_when_it_changes(op: Operated) -> None:
    op.apply(cortex("mem"), subscription("archive"))
    await op.reconcile(KIND, "archive")
    await roll(op)
    item: dict[str, Any] = {
        "name": "archive", "enabled": True, "lag": 0,
        "last_success_at": "2026-12-05T05:00:00+00:00", "last_failure_at": None,
        "last_error": None, "dead_letters": 0, "behind_retention": False}
    report: dict[str, Any] = {"enabled": True, "subscriptions": [item]}
    async with report_server(report) as port:
        server_pod_runs(op, port)
        assert await op.reconcile(KIND, "archive") == DELIVERY_POLL_S  # read again later
        assert op.status(KIND, "archive")["delivery"] == {
            "lag": 0, "lastSuccessTime": "2026-12-05T05:00:00+00:00", "deadLetters": 0,
            "behindRetention": False}
        delivering = op.condition(KIND, "archive", "Delivering")
        assert delivering["status"] == "True" and delivering["observedGeneration"] == 1
        writes = op.writes()
        await op.reconcile(KIND, "archive")
        assert op.writes() == writes  # idle: read, nothing written

        item.update(lag=12, dead_letters=2, last_error="HTTP 503",
                    last_failure_at="2026-12-05T05:01:00+00:00")
        await op.reconcile(KIND, "archive")
        status = op.status(KIND, "archive")
        assert status["delivery"]["lag"] == 12 and status["delivery"]["deadLetters"] == 2
        assert status["delivery"]["lastError"] == "HTTP 503"
        assert op.reasons(KIND, "archive")["Delivering"] == ("False", "DeadLetters")
        assert op.reasons(KIND, "archive")["Ready"] == ("True", "InForce")  # in force still
        assert op.events(KIND, "archive")[-1] == ("Warning", "DeadLetters")

        item.update(lag=0, dead_letters=0, last_success_at="2026-12-05T05:02:00+00:00")
        await op.reconcile(KIND, "archive")
        assert op.reasons(KIND, "archive")["Delivering"] == ("True", "Delivering")
        assert op.events(KIND, "archive")[-1][0] == "Normal"
    writes = op.writes()
    await op.reconcile(KIND, "archive")  # the server gone: unread, the status kept
    assert op.writes() == writes
    assert op.status(KIND, "archive")["delivery"]["lastError"] == "HTTP 503"


def serving(cert_pem: str, key_pem: str, tmp: Path) -> ssl.SSLContext:
    (tmp / "tls.crt").write_text(cert_pem)
    (tmp / "tls.key").write_text(key_pem)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp / "tls.crt", tmp / "tls.key")
    return context


async def test_over_tls_the_report_is_read_only_from_a_server_the_cortex_ca_signed(
        op: Operated, tmp_path: Path) -> None:
    op.apply(cortex("mem", server={"tls": {"selfSigned": {}}}), subscription("archive"))
    await op.reconcile(KIND, "archive")
    await roll_tls(op)
    leaf = n.tls_secret_name("mem")
    report = {"enabled": True, "subscriptions": [{
        "name": "archive", "enabled": True, "lag": 5, "last_success_at": None,
        "last_failure_at": None, "last_error": None, "dead_letters": 0,
        "behind_retention": False}]}
    stranger = pki.issue_ca("someone else", now=datetime.now(UTC))
    forged = pki.issue_leaf(stranger, dns_names=["mem.ns.svc"], now=datetime.now(UTC))
    async with report_server(report, serving(forged.cert_pem, forged.key_pem,
                                             tmp_path)) as port:
        server_pod_runs(op, port, "https")
        await op.reconcile(KIND, "archive")
        assert "delivery" not in op.status(KIND, "archive")  # not the cortex's CA: unread
    async with report_server(report, serving(pem(op, leaf), pem(op, leaf, "tls.key"),
                                             tmp_path)) as port:
        server_pod_runs(op, port, "https")
        await op.reconcile(KIND, "archive")
    assert op.status(KIND, "archive")["delivery"]["lag"] == 5
    assert op.reasons(KIND, "archive")["Delivering"] == ("True", "Delivering")
