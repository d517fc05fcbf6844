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
from attested_cortex.attest import masterkeys as mk
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


async def test_no_canary_anywhere_in_the_chain_with_encryption_at_rest(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Memories sealed at rest, read by get, list and recall (queries and filters with their
    own canaries): no column of any event, checkpoint or tree node holds a canary, as text,
    as its UTF-8 bytes in hex, or as its plain SHA-256 (a guessable text's digest is no
    secret)."""
    key = tmp_path / "master.key"
    key.write_bytes(mk.generate_key())
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           master_key={"file": key}, encryption={"at_rest": True})
    stored = await cortex.store("kb/secret", MEMORY_CANARY, title="okapicanary1234 title",
                                tags=["tapircanary5678"], metadata={"m": "ibexcanary9012"})
    assert (await cortex.call("GET", f"/v1/memories/{stored['id']}")).status == 200
    listed = await cortex.call("GET", "/v1/memories?namespace=kb/secret&tag=tapircanary5678")
    assert listed.status == 200, listed.text
    hits = await cortex.call("POST", "/v1/recall", {"query": f"zebracanary4471 {QUERY_CANARY}",
                                                    "namespace": "kb/secret"})
    assert hits.status == 200 and hits.body["results"], hits.text

    async def recorded() -> bool:
        return sum(e["event_type"] == "memory.access" for e in await events(cortex)) >= 3

    await await_until(recorded, seconds=10, what="three read records")
    assert (await cortex.call("GET", "/v1/audit/checkpoint")).status == 200  # cut: all of it
    canaries = ("zebracanary4471", QUERY_CANARY, "launch code", "okapicanary1234",
                "tapircanary5678", "ibexcanary9012", MEMORY_CANARY,
                f"zebracanary4471 {QUERY_CANARY}")
    needles = [n for c in canaries for n in (c.encode(), c.encode().hex().encode(),
                                             hashlib.sha256(c.encode()).digest(),
                                             hashlib.sha256(c.encode()).hexdigest().encode())]
    async with cortex.services.db.connection() as conn:
        for table in ("signed_events", "audit_checkpoints", "audit_tree_nodes"):
            cur = await conn.execute(f"SELECT * FROM {table}")
            rows = await cur.fetchall()
            assert rows, table
            blob = b"\n".join(bytes(v) if isinstance(v, (bytes, memoryview))
                              else str(v).encode() for row in rows for v in row.values())
            for needle in needles:
                assert needle not in blob, (table, needle)
    report = await cortex.call("GET", "/v1/audit/verify?deep=true")
    assert report.status == 200 and report.body["ok"], report.body


async def test_a_rules_allow_is_summarized_in_the_reads_own_record(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    """Issue 40: Allow decisions are not events of their own; the read's ``memory.access``
    names the rule that let it through (its source) and the verdict, nothing more."""
    rule = {"source": "team/kb-readers", "namespace": "kb/**", "agents": ["dev:tester"],
            "operations": ["recall", "search"], "decision": "allow",
            "reason": "the team reads its knowledge base"}
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           permissions={"mode": "enforce", "rules": [rule]})
    await cortex.store("kb/team", "shared fact")
    hits = await cortex.call("POST", "/v1/recall", {"query": "shared", "namespace": "kb/team"})
    assert hits.status == 200 and hits.body["results"], hits.text
    listed = await cortex.call("GET", "/v1/memories?namespace=kb/team")
    assert listed.status == 200, listed.text

    async def recorded() -> list[dict[str, Any]] | None:
        found = [cbor.decode(bytes(e["payload"])) for e in await events(cortex)
                 if e["event_type"] == "memory.access"]
        return found if len(found) >= 2 else None

    recall, listing = await await_until(recorded, seconds=10, what="two read records")
    assert recall["decisions"] == ["allow:rule:team/kb-readers"], recall
    assert listing["decisions"] == ["allow:rule:team/kb-readers"], listing
    assert not [e for e in await events(cortex) if e["event_type"].startswith("policy.")]
