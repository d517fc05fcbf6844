"""Secrets the server pods need, on the real control plane: a lost Cortex-custody key never
strands a rollout, and a missing referenced Secret stops the roll and is named in status.

Found on the real node (issue 21, item 4): after ``bob-agent-key`` was deleted the server
template still mounted it, so the next rollout left the new pod ``ContainerCreating``
forever; a missing ``tokensSecretRef`` Secret did the same while the status said
``ServerRollingOut``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hack.support.waiting import wait_until

from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite

pytestmark = pytest.mark.kube


def _secret_volumes(operated: Operated, name: str) -> list[str]:
    deploy = operated.get("deployment", f"{name}-server") or {}
    spec = ((deploy.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [v["secret"]["secretName"] for v in spec.get("volumes") or [] if "secret" in v]


def _server_ready(operated: Operated, name: str) -> dict[str, Any]:
    return operated.condition("MemoryCortex", name, "ServerReady") or {}


def test_a_lost_key_is_unmounted_and_the_server_still_scales(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("lost"),
                   satellite("AgentIdentity", "bob", "lost", keyCustody="Cortex"),
                   satellite("AgentIdentity", "carol", "lost", keyCustody="Cortex"))
    operated.kubectl("wait", "--for=condition=Ready", "aid/bob", "aid/carol", "--timeout=120s")
    wait_until(lambda: {"bob-agent-key", "carol-agent-key"}
             <= set(_secret_volumes(operated, "lost")), what="both keys mounted", seconds=120,
               interval_s=0.2)
    operated.kubectl("wait", "--for=condition=Ready", "mcx/lost", "--timeout=120s")

    operated.kubectl("delete", "secret", "bob-agent-key")
    operated.wait_condition("AgentIdentity", "bob", "KeyReady", "False", reason="KeyLost")
    wait_until(lambda: "bob-agent-key" not in _secret_volumes(operated, "lost"),
               what="the lost key unmounted", seconds=90, interval_s=0.2)
    assert "carol-agent-key" in _secret_volumes(operated, "lost")
    operated.kubectl("patch", "mcx/lost", "--type=merge", "-p",
                     json.dumps({"spec": {"server": {"replicas": 2}}}))
    ready = operated.wait_condition("MemoryCortex", "lost", "ServerReady", "True", seconds=120)
    assert "cannot sign for AgentIdentity bob (key Secret bob-agent-key is gone)" \
        in ready["message"]


def test_a_missing_tokens_secret_stops_the_roll_and_is_named(
        operated: Operated, operator: OperatorProcess) -> None:
    operated.apply(cortex("toks", server={"auth": {"mode": "Tokens", "tokensSecretRef": {
        "name": "toks-tokens", "key": "tokens"}}}))
    missing = operated.wait_condition("MemoryCortex", "toks", "ServerReady", "False",
                                      reason="SecretMissing", seconds=120)
    assert missing["message"].startswith(
        "Secret toks-tokens (volume tokens) does not exist; the server is not rolled")
    ready = operated.condition("MemoryCortex", "toks", "Ready") or {}
    assert (ready.get("reason"), ready.get("status")) == ("SecretMissing", "False")
    assert operated.get("deployment", "toks-server") is None  # no pod waits on a mount

    operated.kubectl("create", "secret", "generic", "toks-tokens", "--from-literal=tokens={}")
    operated.kubectl("wait", "--for=condition=Ready", "mcx/toks", "--timeout=120s")
    assert "toks-tokens" in _secret_volumes(operated, "toks")

    # Deleted again under a running server: the next change is not rolled onto it.
    operated.kubectl("delete", "secret", "toks-tokens")
    generation = operated.get("deployment", "toks-server")["metadata"]["generation"]
    operated.kubectl("patch", "mcx/toks", "--type=merge", "-p",
                     json.dumps({"spec": {"server": {"replicas": 2}}}))
    operated.wait_condition("MemoryCortex", "toks", "ServerReady", "False",
                            reason="SecretMissing", seconds=90)
    assert operated.get("deployment", "toks-server")["metadata"]["generation"] == generation
    assert _server_ready(operated, "toks")["observedGeneration"] == \
        operated.get("MemoryCortex", "toks")["metadata"]["generation"]


def test_a_hand_edited_key_is_unmounted_until_restored(
        operated: Operated, operator: OperatorProcess) -> None:
    """A key Secret edited by hand (KeyMismatch) is not mounted: the server neither signs
    with nor holds a key nobody rotated to; restoring the files mounts it again. (The
    namespace is module-wide: the names differ from the lost-key test's.)"""
    operated.apply(cortex("edit"),
                   satellite("AgentIdentity", "dave", "edit", keyCustody="Cortex"),
                   satellite("AgentIdentity", "erin", "edit", keyCustody="Cortex"))
    operated.kubectl("wait", "--for=condition=Ready", "aid/dave", "aid/erin", "--timeout=120s")
    wait_until(lambda: {"dave-agent-key", "erin-agent-key"}
               <= set(_secret_volumes(operated, "edit")),
               what="both keys mounted", seconds=120, interval_s=0.2)
    files = ("private.pem", "public.pem", "fingerprint")
    original = {f: operated.get("secret", "dave-agent-key")["data"][f] for f in files}
    erin = {f: operated.get("secret", "erin-agent-key")["data"][f] for f in files}

    operated.kubectl("patch", "secret/dave-agent-key", "--type=merge", "-p",
                     json.dumps({"data": erin}))
    operated.wait_condition("AgentIdentity", "dave", "KeyReady", "False", reason="KeyMismatch")
    wait_until(lambda: "dave-agent-key" not in _secret_volumes(operated, "edit"),
               what="the edited key unmounted", seconds=90, interval_s=0.2)
    assert "erin-agent-key" in _secret_volumes(operated, "edit")
    said = ("cannot sign for AgentIdentity dave (key Secret dave-agent-key was changed by "
            "hand: KeyMismatch)")
    wait_until(lambda: said in _server_ready(operated, "edit").get("message", ""),
               what="the status says who cannot sign", seconds=90, interval_s=0.2)

    operated.kubectl("patch", "secret/dave-agent-key", "--type=merge", "-p",
                     json.dumps({"data": original}))
    operated.wait_condition("AgentIdentity", "dave", "KeyReady", reason="KeyInSecret")
    wait_until(lambda: "dave-agent-key" in _secret_volumes(operated, "edit"),
               what="the restored key mounted again", seconds=90, interval_s=0.2)
