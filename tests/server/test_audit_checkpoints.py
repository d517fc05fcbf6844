"""The audit tree over HTTP and MCP (issue 40, ADR 0099): the server signs C2SP checkpoints
with its audit signer, and its inclusion and consistency proofs hold against them, checked
by pymerkle (an independent RFC 9162 implementation) and the RFC 9162 verifier."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from pymerkle import InclusionProof
from pymerkle.core import _inclusion_path_layout

from attested_cortex.attest import merkle, notes
from attested_cortex.attest.keyfiles import write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex

SIGNER = "cortex:audit"


async def audited(make_cortex: MakeCortex, dsn: str, tmp_path: Path, **settings: Any
                  ) -> CortexClient:
    """A cortex with an audit signer whose checkpointer only cuts when asked (or in 1 h)."""
    keys = tmp_path / "keys"
    if not (keys / "audit").exists():
        write_identity(keys / "audit", generate_key(AgentId(SIGNER)))
    settings.setdefault("audit", {"checkpoints": {"every_events": 10**6,
                                                  "every_seconds": 3600}})
    return await make_cortex(dsn, migrated=False, keys_dir=keys, audit_signer=SIGNER,
                             **settings)


def _b(text: str) -> bytes:
    return base64.b64decode(text)


async def checkpoint(cortex: CortexClient) -> tuple[notes.Checkpoint, str, notes.Verifier]:
    reply = await cortex.call("GET", "/v1/audit/checkpoint",
                              headers={"Accept": "application/json"})
    assert reply.status == 200, reply.text
    log = notes.Verifier.parse(reply.body["log_key"])
    text = await cortex.call("GET", "/v1/audit/checkpoint")
    assert text.status == 200 and text.text == reply.body["note"]
    assert text.headers["Content-Type"].startswith("text/plain")
    return notes.open_checkpoint(reply.body["note"], log), reply.body["note"], log


async def test_proofs_hold_against_the_signed_checkpoints(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    assert (await cortex.call("GET", "/v1/audit/checkpoint")).status == 404  # empty chain
    for i in range(5):
        await cortex.store("kb", f"memory {i}")
    first, _, log = await checkpoint(cortex)  # cut on demand: it covers the chain
    assert log.name == f"attested-cortex/{SIGNER}" and first.size == 5
    for i in range(12):
        await cortex.store("kb", f"more {i}")
    proof = await cortex.call("GET", "/v1/audit/proof?seq=17")  # past it: cut now
    assert proof.status == 200, proof.text
    second, note, _ = await checkpoint(cortex)
    assert second.size == 17 and notes.open_checkpoint(proof.body["checkpoint"], log) == second

    hashes = [merkle.leaf_hash(bytes(row)) for row in await _event_hashes(cortex)]
    for seq in range(1, 18):
        reply = await cortex.call("GET", f"/v1/audit/proof?seq={seq}")
        assert reply.status == 200, reply.text
        body = reply.body
        assert _b(body["leaf_hash"]) == hashes[seq - 1] and _b(body["root_hash"]) == second.root
        path = [_b(h) for h in body["proof"]]
        rule, _ = _inclusion_path_layout(seq, 17)
        InclusionProof("sha256", True, 17, seq, rule, [hashes[seq - 1], *path]).verify(
            hashes[seq - 1], second.root, index=seq, size=17)
        at_first = await cortex.call("GET", f"/v1/audit/proof?seq={min(seq, 5)}&size=5")
        assert _b(at_first.body["root_hash"]) == first.root
    reply = await cortex.call("GET", "/v1/audit/consistency?from=5&to=17")
    assert reply.status == 200, reply.text
    merkle.verify_consistency(5, 17, first.root, second.root,
                              [_b(h) for h in reply.body["proof"]])
    assert reply.body["from"] == 5 and _b(reply.body["to_root"]) == second.root

    refused = await cortex.call("GET", "/v1/audit/consistency?from=18&to=17")
    assert refused.status == 400, refused.text
    beyond = await cortex.call("GET", "/v1/audit/proof?seq=1&size=40")
    assert beyond.status == 404 and beyond.body["error"]["code"] == "not_checkpointed"
    unscoped = await cortex.call("GET", "/v1/audit/checkpoint", agent=None)
    assert unscoped.status in (401, 403)
    assert note.endswith("\n")


async def test_the_checkpointer_cuts_every_n_events(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    from hack.support.waiting import await_until

    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           audit={"checkpoints": {"every_events": 3, "every_seconds": 3600}})
    for i in range(4):
        await cortex.store("kb", f"memory {i}")

    async def cut() -> bool:
        async with cortex.services.db.connection() as conn:
            cur = await conn.execute("SELECT max(tree_size) AS size FROM audit_checkpoints")
            row = await cur.fetchone()
        return row is not None and row["size"] is not None

    await await_until(cut, seconds=10, what="a checkpoint after 3 events")


async def _event_hashes(cortex: CortexClient) -> list[bytes]:
    async with cortex.services.db.connection() as conn:
        cur = await conn.execute("SELECT hash FROM signed_events ORDER BY sequence")
        rows = await cur.fetchall()
    return [bytes(r["hash"] if isinstance(r, dict) else r[0]) for r in rows]
