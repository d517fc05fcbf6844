"""Every spoke read applies the coverage of ``memory.records.get`` (issue 37 item 1, ADR
0082): a grantee limited to context c1, on a space with c1 and c2 data, calls each of the
33 ops and never sees what a c2 record holds (its text, or its id), whether through a
record, a recall hit, a reflection derived from it, a candidate, an export or a receipt.

The grantee holds every capability at c1, and ``recall``, ``reflections`` and ``transfer``
(not ``records_read``) at c2: a read through those shows no record ``records.get`` would
answer 404 for. One real server; the space's c2 data is written by its authority.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

from attested_cortex.spoke.operations import MEMORY_OPS
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op
from tests.spoke.test_tier_ceilings import ALL_FLAGS, EVERY
from tests.support.cortex import MakeCortex

SPACE = {"space_id": "kb"}
SUBJECT = {**SPACE, "subject_id": "u1"}
SECRET = "zebra"  # every c2 text holds it; no answer to the grantee may


async def _space(crew: Agents) -> dict[str, str]:
    """c1 and c2 records, a c2 candidate, a reflection over both, an export of both: the ids."""
    await ok(crew, "owner", "memory.subjects.ensure", SUBJECT)
    await ok(crew, "owner", "memory.grants.grant", {
        **SPACE, "principal_id": "g", "capabilities": EVERY, "context_ids": ["c1"]})
    await ok(crew, "owner", "memory.grants.grant", {
        **SPACE, "principal_id": "g", "capabilities": ["recall", "reflections", "transfer"],
        "context_ids": ["c2"]})
    ids = {}
    for context, text in (("c1", "Walks the dog at dawn."),
                          ("c2", f"Keeps the {SECRET} code at dawn.")):
        made = await ok(crew, "owner", "memory.records.create", {
            **SUBJECT, "content": {"text": text}, "placement": {"context_id": context}})
        ids[context] = made["refs"][0]
    captured = await ok(crew, "owner", "memory.capture", {
        **SUBJECT, "capture_scope": {"context_id": "c2"},
        "items": [{"text": f"the {SECRET} at dawn"}]})
    ids["candidate"] = captured["refs"][0]
    await ok(crew, "owner", "memory.reflections.generate", SUBJECT, flags=ALL_FLAGS)
    made = await ok(crew, "owner", "memory.exports.create", SPACE, flags=ALL_FLAGS)
    ids["export"] = made["refs"][0]
    return ids


def _requests(ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Each op, aimed at the c2 data wherever it names something."""
    c2 = {**SPACE, "record_id": ids["c2"]}
    candidate = {**SPACE, "candidate_id": ids["candidate"]}
    everything = {"selection": {"mode": "all_authorized"}}
    return {
        "memory.describe": {}, "memory.spaces.list": {},
        "memory.spaces.freeze": {**SPACE, "expected_revision": 999},
        "memory.spaces.unfreeze": {**SPACE, "expected_revision": 999},
        "memory.subjects.ensure": SUBJECT, "memory.subjects.get": SUBJECT,
        "memory.subjects.fence": {**SUBJECT, "action": "fence_context", "context_id": "c9"},
        "memory.grants.list": SPACE,
        "memory.grants.grant": {**SPACE, "principal_id": "h", "capabilities": ["recall"],
                                "context_ids": ["c2"]},
        "memory.grants.revoke": {**SPACE, "grant_id": str(uuid.uuid4())},
        "memory.capture": {**SUBJECT, "capture_scope": {"context_id": "c1"},
                           "items": [{"text": "new"}]},
        "memory.candidates.list": {**SPACE, "state": "all"},
        "memory.candidates.get": candidate, "memory.candidates.dismiss": candidate,
        "memory.candidates.review": {**candidate, "decision": "promote"},
        "memory.records.create": {**SUBJECT, "content": {"text": "mine"},
                                  "placement": {"context_id": "c1"}},
        "memory.records.get": c2,
        "memory.records.update": {**c2, "expected_revision": 1, "content": {"text": "x"}},
        "memory.records.delete": {**c2, "expected_revision": 1},
        "memory.records.list": {**SPACE, **everything},
        "memory.records.promote": {**c2, "expected_revision": 1, "placement": {"shared": True}},
        "memory.recall": {**SPACE, **everything, "query": f"{SECRET} dawn"},
        "memory.profile.get": SUBJECT,
        "memory.profile.update": {**SUBJECT, "kind": "bio", "text": "x"},
        "memory.receipts.get": {**SPACE, "receipt_id": str(uuid.uuid4())},
        "memory.reflections.state": SUBJECT, "memory.reflections.list": SUBJECT,
        "memory.reflections.generate": SUBJECT,
        "memory.exports.create": SPACE,
        "memory.exports.get": {**SPACE, "export_id": ids["export"], "ordinal": 0},
        "memory.imports.stage": {**SPACE, "import_id": str(uuid.uuid4()), "ordinal": 0,
                                 "final": False, "data": "", "digest": "0" * 64},
        "memory.imports.activate": {**SPACE, "import_id": str(uuid.uuid4())},
        "memory.imports.discard": {**SPACE, "import_id": str(uuid.uuid4())},
    }


async def _export_text(crew: Agents, who: str, export_id: str) -> str:
    chunks: list[dict[str, Any]] = []
    while not chunks or not chunks[-1]["final"]:
        chunks.append(await ok(crew, who, "memory.exports.get", {
            **SPACE, "export_id": export_id, "ordinal": len(chunks)}, flags=ALL_FLAGS))
    return b"".join(base64.b64decode(c["data"]) for c in chunks).decode(errors="replace")


async def test_a_c1_grantee_sees_nothing_of_c2_through_any_op(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crew = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "g": ""})
    ids = await _space(crew)
    requests = _requests(ids)
    assert set(requests) == set(MEMORY_OPS)
    leaks = []
    for name, request in requests.items():
        reply = await op(crew, "g", name, request, flags=ALL_FLAGS)
        named = ids["c2"] in json.dumps(request)  # a 404 may echo the id it was asked
        if SECRET in reply.text or (ids["c2"] in reply.text and not named):
            leaks.append((name, reply.status, reply.text[:200]))
        if name == "memory.exports.create" and reply.status == 200:
            text = await _export_text(crew, "g", reply.body["refs"][0])
            if SECRET in text or "Walks the dog" not in text:
                leaks.append(("memory.exports.get of its own export", 200, text[:200]))
    assert leaks == []
    # the c2 record is untouched, and the authority still sees all of it
    record = await ok(crew, "owner", "memory.records.get", {**SPACE, "record_id": ids["c2"]})
    assert SECRET in record["content"]["text"] and record["revision"] == 1
    listed = await ok(crew, "owner", "memory.reflections.list", SUBJECT, flags=ALL_FLAGS)
    assert [SECRET in r["text"] for r in listed["reflections"]] == [False, True]
    assert SECRET in await _export_text(crew, "owner", ids["export"])


async def test_an_export_is_fetched_only_under_the_grants_it_was_built_under(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """An export is a read too: once the grant that let its creator read c2 is revoked, the
    creator's export holding c2 is refused (409 ``export_stale``), as ``records.get`` on the
    c2 record is 404; a new export carries c1 only. The authority's exports stand."""
    crew = await agents(make_cortex, migrated_pg15_dsn, tmp_path, {"owner": OWNER, "g": ""})
    await ok(crew, "owner", "memory.subjects.ensure", SUBJECT)
    grants = {}
    for context in ("c1", "c2"):
        grants[context] = (await ok(crew, "owner", "memory.grants.grant", {
            **SPACE, "principal_id": "g", "capabilities": ["transfer", "records_read"],
            "context_ids": [context]}))["refs"][0]
        await ok(crew, "owner", "memory.records.create", {
            **SUBJECT, "content": {"text": f"{SECRET} at {context}"},
            "placement": {"context_id": context}})
    built = (await ok(crew, "g", "memory.exports.create", SPACE, flags=ALL_FLAGS))["refs"][0]
    assert f"{SECRET} at c2" in await _export_text(crew, "g", built)
    owners = (await ok(crew, "owner", "memory.exports.create", SPACE, flags=ALL_FLAGS))[
        "refs"][0]
    await ok(crew, "owner", "memory.grants.revoke", {**SPACE, "grant_id": grants["c2"]})
    stale = await op(crew, "g", "memory.exports.get", {
        **SPACE, "export_id": built, "ordinal": 0}, flags=ALL_FLAGS)
    assert stale.status == 409 and stale.body["error"]["code"] == "export_stale", stale.text
    again = (await ok(crew, "g", "memory.exports.create", SPACE, flags=ALL_FLAGS))["refs"][0]
    text = await _export_text(crew, "g", again)
    assert f"{SECRET} at c1" in text and f"{SECRET} at c2" not in text
    assert f"{SECRET} at c2" in await _export_text(crew, "owner", owners)
