"""Trust tiers over the spoke-memory family (issue 37 item 6, ADR 0083): every one of the 33
ops is checked with the native scope it exercises, so a tier's ceiling holds it as it holds
the native API. One real server; each tiered principal holds a grant of every capability in
``public/kb``, so only the ceiling (or a missing scope) can refuse an op's scope step.

Cells are written out by hand: ``ok`` (not refused by scope or ceiling: the handler's own
answer, 200 or its 4xx, follows), ``TC`` (403 ``trust_ceiling``), ``SD`` (403
``scope_denied``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from attested_cortex.spoke.operations import MEMORY_OPS
from tests.server.test_permissions_api import Agents, agents
from tests.spoke.test_dispatch_api import OWNER, ok, op
from tests.support.cortex import MakeCortex

SPACE = "public/kb"
ALL_FLAGS = "spoke-memory, spoke-memory-reflection, spoke-memory-transfer"
EVERY = ["records_read", "records_write", "capture", "review", "recall", "profiles_read",
         "profiles_write", "reflections", "grants", "admin", "transfer"]
#: principal -> its token's scopes and tier
TOKENS = {
    "owner": OWNER,
    "t": "",
    "s": "tier=SemiTrusted",
    "sf": "memory.read,memory.write,memory.forget:public/**,audit.read:public/** "
          "tier=SemiTrusted",
    "u": "memory.read:public/**,memory.write:public/**,audit.read:public/** tier=Untrusted",
}
#: the native scope each op exercises (by hand, from ADR 0083; ``W + F``: both)
R, W, F, A = "memory.read", "memory.write", "memory.forget", "audit.read"
#: base -> expected answer of (t, s, sf, u)
CELLS = {R: ("ok", "ok", "ok", "ok"), W: ("ok", "ok", "ok", "TC"),
         F: ("ok", "TC", "ok", "SD"), A: ("ok", "TC", "ok", "ok"),
         W + F: ("ok", "TC", "ok", "TC")}


def _requests() -> dict[str, tuple[str, dict[str, Any]]]:
    """One well-formed request per op (and its expected base), ids made up where needed."""
    some = str(uuid.uuid4())
    at = {"space_id": SPACE}
    subject = {**at, "subject_id": "u1"}
    return {
        "memory.describe": (R, {}),
        "memory.spaces.list": (R, {}),
        "memory.spaces.freeze": (W, {**at, "expected_revision": 999}),
        "memory.spaces.unfreeze": (W, {**at, "expected_revision": 999}),
        "memory.subjects.ensure": (W, subject),
        "memory.subjects.get": (R, subject),
        "memory.subjects.fence": (W, {**subject, "action": "fence_context",
                                      "context_id": "c9"}),
        "memory.grants.list": (R, at),
        "memory.grants.grant": (W, {**at, "principal_id": "nobody",
                                    "capabilities": ["records_read"]}),
        "memory.grants.revoke": (W, {**at, "grant_id": some}),
        "memory.capture": (W, {**subject, "capture_scope": {"context_id": "c1"},
                               "items": [{"text": "x"}]}),
        "memory.candidates.list": (R, at),
        "memory.candidates.get": (R, {**at, "candidate_id": some}),
        "memory.candidates.dismiss": (F, {**at, "candidate_id": some}),
        "memory.candidates.review": (W, {**at, "candidate_id": some, "decision": "promote"}),
        "memory.records.create": (W, {**subject, "content": {"text": "x"},
                                      "placement": {"context_id": "c1"}}),
        "memory.records.get": (R, {**at, "record_id": some}),
        "memory.records.update": (W, {**at, "record_id": some, "expected_revision": 1,
                                      "content": {"text": "y"}}),
        "memory.records.delete": (F, {**at, "record_id": some, "expected_revision": 1}),
        "memory.records.list": (R, at),
        "memory.records.promote": (W, {**at, "record_id": some, "expected_revision": 1,
                                       "placement": {"shared": True}}),
        "memory.recall": (R, {**at, "query": "x"}),
        "memory.profile.get": (R, subject),
        "memory.profile.update": (W, {**subject, "kind": "bio", "text": "x"}),
        "memory.receipts.get": (R, {**at, "receipt_id": some}),
        "memory.reflections.state": (R, subject),
        "memory.reflections.list": (R, subject),
        "memory.reflections.generate": (W, subject),
        "memory.exports.create": (W, at),
        "memory.exports.get": (R, {**at, "export_id": some, "ordinal": 0,
                                   "manifest_digest": "0" * 64}),
        "memory.imports.stage": (W, {**at, "import_id": some, "ordinal": 0, "final": False,
                                     "data": "", "digest": "0" * 64}),
        "memory.imports.activate": (W, {**at, "import_id": some}),
        "memory.imports.discard": (W, {**at, "import_id": some}),
    }


#: request variants whose content decides a further scope
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "review drop": (W + F, {"decision": "drop"}),
    "grants.list admin": (A, {"view": "admin"}),
}


def _verdict(status: int, body: Any) -> str:
    code = body.get("error", {}).get("code") if isinstance(body, dict) else None
    if status == 403 and code == "trust_ceiling":
        return "TC"
    if status == 403 and code == "scope_denied":
        return "SD"
    return "ok"


async def test_the_tier_matrix_over_every_spoke_op(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    crew: Agents = await agents(make_cortex, migrated_pg15_dsn, tmp_path, TOKENS)
    await ok(crew, "owner", "memory.subjects.ensure", {"space_id": SPACE, "subject_id": "u1"})
    for who in ("t", "s", "sf", "u"):
        await ok(crew, "owner", "memory.grants.grant", {
            "space_id": SPACE, "principal_id": who, "capabilities": EVERY,
            "shared_access": True})
    requests = _requests()
    assert set(requests) == set(MEMORY_OPS)
    cases = [(name, base, request) for name, (base, request) in requests.items()]
    cases += [(label, base, {**requests["memory.candidates.review" if "review" in label
                                        else "memory.grants.list"][1], **extra})
              for label, (base, extra) in VARIANTS.items()]
    wrong = []
    for label, base, request in cases:
        name = label if label in MEMORY_OPS else (
            "memory.candidates.review" if "review" in label else "memory.grants.list")
        for who, expected in zip(("t", "s", "sf", "u"), CELLS[base], strict=True):
            reply = await op(crew, who, name, request, flags=ALL_FLAGS)
            got = _verdict(reply.status, reply.body)
            if got != expected:
                wrong.append((label, who, expected, reply.status, reply.text[:160]))
    assert wrong == []


async def test_a_semitrusted_grantee_deletes_only_with_a_qualified_forget(
    make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    """The reproduction: SemiTrusted with ``records_write`` tombstoned the authority's record
    through ``memory.records.delete`` while native DELETE answered 403 ``trust_ceiling``."""
    crew: Agents = await agents(make_cortex, migrated_pg15_dsn, tmp_path, TOKENS)
    await ok(crew, "owner", "memory.subjects.ensure", {"space_id": SPACE, "subject_id": "u1"})
    for who in ("s", "sf"):
        await ok(crew, "owner", "memory.grants.grant", {
            "space_id": SPACE, "principal_id": who, "capabilities": [
                "records_read", "records_write"], "context_ids": ["c1"]})
    made = []
    for _ in range(2):
        receipt = await ok(crew, "owner", "memory.records.create", {
            "space_id": SPACE, "subject_id": "u1", "content": {"text": "the owner's"},
            "placement": {"context_id": "c1"}})
        made.append(receipt["refs"][0])
    native = await crew.call("s", "DELETE", f"/v1/memories/{made[0]}")
    assert native.status == 403 and native.body["error"]["code"] == "trust_ceiling"
    spoke = await op(crew, "s", "memory.records.delete", {
        "space_id": SPACE, "record_id": made[0], "expected_revision": 1})
    assert spoke.status == 403 and spoke.body["error"]["code"] == "trust_ceiling", spoke.text
    assert spoke.body["error"]["details"]["scope"] == "memory.forget"
    kept = await ok(crew, "owner", "memory.records.get", {"space_id": SPACE,
                                                          "record_id": made[0]})
    assert kept["content"]["text"] == "the owner's"
    await ok(crew, "sf", "memory.records.delete", {
        "space_id": SPACE, "record_id": made[1], "expected_revision": 1})
