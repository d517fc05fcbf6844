"""The master key Secret (ADR 0050): made once, never replaced (a restored ring with two
versions is adopted as it is), mounted, named in config.yaml, never in status, events or
the operator's log."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from attested_cortex.builders import names as n
from tests.controller_fast.conftest import Operated, cortex
from tests.controller_fast.test_memorycortex_settings import KIND, config, pod_spec, roll

SECRET = n.master_key_secret_name("mem")


async def test_the_master_key_is_made_once_and_mounted(
        op: Operated, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    op.apply(cortex("mem"))
    await roll(op)
    first = op.get("Secret", SECRET, "v1") or {}
    data = {k: base64.b64decode(v).decode() for k, v in first["data"].items()}
    assert data["current"] == "v1" and len(bytes.fromhex(data["v1"])) == 32
    assert [r["kind"] for r in first["metadata"]["ownerReferences"]] == [
        "MemoryCortex", "Namespace"]
    assert config(op)["master_key"] == {"dir": "/var/run/cortex/master-key"}
    volumes = {str(v["name"]): v for v in pod_spec(op)["volumes"]}
    assert volumes["master-key"]["secret"]["secretName"] == SECRET  # type: ignore[index]
    for _ in range(3):  # re-reconciles (and an operator restart: same code path) keep it
        await op.reconcile(KIND, "mem")
    again = op.get("Secret", SECRET, "v1") or {}
    assert again["data"] == first["data"]
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    said = json.dumps([op.status(KIND, "mem"), op.cluster.events(KIND, "mem", "ns")])
    for shown in (said, caplog.text):
        assert data["v1"] not in shown and first["data"]["v1"] not in shown


async def test_an_existing_ring_is_adopted_not_replaced(op: Operated) -> None:
    """A Secret restored from a backup (two versions, the second current) before the cortex
    is made again: the operator keeps it byte for byte."""
    ring = {"v1": "11" * 32, "v2": "22" * 32, "current": "v2"}
    op.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
              "metadata": {"name": SECRET},
              "data": {k: base64.b64encode(v.encode()).decode() for k, v in ring.items()}})
    op.apply(cortex("mem"))
    await roll(op)
    kept = op.get("Secret", SECRET, "v1") or {}
    assert {k: base64.b64decode(v).decode() for k, v in kept["data"].items()} == ring
