"""Receipts (issue 40, ADR 0104): a get, a listing and a recall asked with ``receipts: true``
(HTTP and MCP) carry, for each returned memory, the inclusion proof of the event that last
wrote it; a client holding only the answer and a checkpoint a witness cosigned checks each
one with pymerkle (an independent RFC 9162 implementation) and the cosignature with the
witness's key. Without the flag the answers are unchanged."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
from pymerkle import InclusionProof
from pymerkle.core import _inclusion_path_layout

from attested_cortex.attest import decoding as cbor
from attested_cortex.attest import notes
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import ok
from tests.server.test_audit_checkpoints import audited
from tests.server.test_audit_witness import _witness_public, witness
from tests.support.cortex import MakeCortex


def _b(text: str) -> bytes:
    return base64.b64decode(text)


def check_receipt(receipts: dict[str, Any], memory: dict[str, Any], held: notes.Checkpoint
                  ) -> int:
    """What a client does with a receipt: the record names this memory at this revision,
    the leaf is the event's, and pymerkle verifies the path to the cosigned root. Returns
    the event's sequence."""
    assert receipts["tree_size"] == held.size and _b(receipts["root_hash"]) == held.root
    receipt = receipts["memories"][memory["id"]]
    record = cbor.decode(_b(receipt["record"]))
    assert (record["memory_id"], record["revision"]) == (memory["id"], memory["revision"])
    assert receipt["event_type"].startswith("memory.")
    return verify_inclusion(receipt, held.size, held.root)


def verify_inclusion(receipt: dict[str, Any], size: int, root: bytes) -> int:
    """The receipt's leaf is its event's hash and its path leads to ``root`` in a tree of
    ``size`` (pymerkle's verifier, not ours). Returns the event's sequence."""
    leaf = hashlib.sha256(b"\x00" + _b(receipt["event_hash"])).digest()
    assert leaf == _b(receipt["leaf_hash"])
    index = receipt["leaf_index"] + 1  # pymerkle counts from 1
    rule, _ = _inclusion_path_layout(index, size)
    proof = InclusionProof("sha256", True, size, index, rule,
                           [leaf, *(_b(h) for h in receipt["proof"])])
    proof.verify(leaf, root, index=index, size=size)
    return int(receipt["seq"])


async def test_receipts_verify_against_a_witnessed_checkpoint(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    stored = [await cortex.store("kb/r", f"receipt memory {i}") for i in range(6)]
    changed = await cortex.call("PATCH", f"/v1/memories/{stored[2]['id']}",
                                {"content": "receipt memory changed"})
    assert changed.status == 200, changed.text
    for i in range(3):
        await cortex.store("kb/other", f"unrelated {i}")
    state = tmp_path / "witness"
    code, said = await witness(cortex, state, capsys)
    assert code == 0 and "cosigned: size 10" in said, said
    cosigned = (state / "checkpoint").read_text()
    log = notes.Verifier.parse((state / "log.vkey").read_text())
    held = notes.open_checkpoint(cosigned, log)
    assert notes.verify_cosignature(cosigned, notes.Verifier(
        "witness.test/w1", notes.COSIGNATURE_V1, _witness_public(state))) > 0

    got = await cortex.call("GET", f"/v1/memories/{stored[2]['id']}?receipts=true")
    assert got.status == 200, got.text
    assert check_receipt(got.body["receipts"], got.body, held) == 7  # the update's event
    # the same checkpoint the witness holds (a pull witness keeps its cosignature itself;
    # one that pushes it back, tests/server/test_real_witness.py, has it in this note too)
    assert notes.open_checkpoint(got.body["receipts"]["checkpoint"], log) == held
    assert got.body["receipts"]["log_key"] == log.vkey()

    listed = await cortex.call("GET", "/v1/memories?namespace=kb/r&receipts=true")
    assert listed.status == 200, listed.text
    seqs = {check_receipt(listed.body["receipts"], m, held) for m in listed.body["memories"]}
    assert seqs == {1, 2, 4, 5, 6, 7}
    recalled = await cortex.call("POST", "/v1/recall", {"query": "receipt memory",
                                                        "receipts": True})
    assert recalled.status == 200 and recalled.body["results"], recalled.text
    for hit in recalled.body["results"]:
        check_receipt(recalled.body["receipts"], hit, held)
    async with mcp_client(cortex) as client:
        over_mcp = ok(await client.call_tool("memory_get", {"id": stored[0]["id"],
                                                            "receipts": True}))
        assert check_receipt(over_mcp["receipts"], over_mcp, held) == 1
        mcp_recall = ok(await client.call_tool("memory_recall", {"query": "receipt",
                                                                 "receipts": True}))
        assert set(mcp_recall["receipts"]["memories"]) == {h["id"] for h in
                                                           mcp_recall["results"]}
        mcp_list = ok(await client.call_tool("memory_list", {"namespace": "kb/r",
                                                             "receipts": True}))
        assert len(mcp_list["receipts"]["memories"]) == 6

    plain = await cortex.call("GET", f"/v1/memories/{stored[0]['id']}")
    assert "receipts" not in plain.body
    caps = (await cortex.call("GET", "/v1/capabilities")).body["attestation"]
    assert caps["receipts"] is True and caps["read_records"] is True


async def test_a_write_past_the_checkpoint_cuts_one_and_no_signer_is_404(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    first = await cortex.store("kb", "early")
    assert (await cortex.call("GET", "/v1/audit/checkpoint")).status == 200  # size 1
    late = await cortex.store("kb", "late")
    got = await cortex.call("GET", f"/v1/memories/{late['id']}?receipts=true")
    assert got.status == 200, got.text
    assert got.body["receipts"]["tree_size"] >= 2  # cut now: a receipt never "later"
    assert got.body["receipts"]["memories"][late["id"]]["seq"] == 2
    assert first["id"] != late["id"]

    bare = await make_cortex(migrated_pg15_dsn, migrated=False)
    refused = await bare.call("GET", f"/v1/memories/{first['id']}?receipts=true")
    assert refused.status == 404 and refused.body["error"]["code"] == "no_checkpoints"
    caps = (await bare.call("GET", "/v1/capabilities")).body["attestation"]
    assert caps["receipts"] is False
