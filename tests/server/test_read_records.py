"""Reads in the audit chain (issue 40): a recall, a get and a listing each append a
``memory.access`` statement signed by the audit signer, with digests only (a canary in a
memory and one in the query appear nowhere in the chain), a scope refusal is recorded, the
deep audit still passes, and ``audit.record_reads: false`` records none."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from hack.support.waiting import await_until

from attested_cortex.attest import decoding as cbor
from tests.server.test_audit_checkpoints import SIGNER, audited
from tests.support.cortex import CortexClient, MakeCortex

MEMORY_CANARY = "zebracanary4471 the launch code"
QUERY_CANARY = "quaggacanary9902"


async def events(cortex: CortexClient) -> list[dict[str, Any]]:
    async with cortex.services.db.connection() as conn:
        cur = await conn.execute(
            "SELECT sequence, agent_id, event_type, payload, signature FROM signed_events "
            "ORDER BY sequence")
        return list(await cur.fetchall())


async def test_reads_are_recorded_with_digests_only(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           encryption={"at_rest": False})
    stored = await cortex.store("kb/secret", MEMORY_CANARY)
    other = await cortex.store("kb/other", "zebracanary4471 second")
    hits = await cortex.call("POST", "/v1/recall",
                             {"query": f"zebracanary4471 {QUERY_CANARY}"})
    assert hits.status == 200, hits.text
    got = await cortex.call("GET", f"/v1/memories/{stored['id']}")
    assert got.status == 200
    refused = await cortex.call("GET", "/v1/memories?namespace=kb",
                                headers={"X-Cortex-Scopes": "memory.write"})
    async def recorded() -> list[dict[str, Any]] | None:  # appended behind the answers
        found = await events(cortex)
        return found if sum(e["event_type"] == "memory.access" for e in found) >= 2 else None

    chain = await await_until(recorded, seconds=10, what="two read records")
    blob = b"".join(bytes(e["payload"]) for e in chain)
    for canary in ("zebracanary4471", QUERY_CANARY, "launch code"):
        assert canary.encode() not in blob, canary

    access = [e for e in chain if e["event_type"] == "memory.access"]
    assert [e["agent_id"] for e in access] == [SIGNER, SIGNER]
    assert all(e["signature"] is not None for e in access)
    recall, get = (cbor.decode(bytes(e["payload"])) for e in access)
    assert recall["operation"] == "recall" and recall["actor"] == "dev:tester"
    ids = sorted(str(h["id"]) for h in hits.body["results"])
    assert set(ids) == {stored["id"], other["id"]}
    assert recall["results"] == 2
    assert recall["results_sha256"] == hashlib.sha256("\n".join(ids).encode()).hexdigest()
    assert recall["namespaces"] == ["kb/other", "kb/secret"]
    assert recall["decisions"] == ["allow:default"]  # the Allow that let it through
    assert get["operation"] == "memory.get" and get["results"] == 1
    assert refused.status == 403
    (denied,) = [cbor.decode(bytes(e["payload"])) for e in chain
                 if e["event_type"] == "policy.enforced"]
    assert denied["source"] == "scope_denied" and denied["operation"] == "memory.list"

    report = await cortex.call("GET", "/v1/audit/verify?deep=true")
    assert report.status == 200 and report.body["ok"], report.body


async def test_reads_are_not_recorded_when_switched_off(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           audit={"record_reads": False})
    stored = await cortex.store("kb", "something")
    assert (await cortex.call("GET", f"/v1/memories/{stored['id']}")).status == 200
    assert (await cortex.call("POST", "/v1/recall", {"query": "something"})).status == 200
    assert not [e for e in await events(cortex) if e["event_type"] == "memory.access"]
