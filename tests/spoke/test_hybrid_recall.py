"""``memory.recall`` is the native recall (ADR 0068): with the default embedder running, a
paraphrase sharing no word with its record is found by the vector half, in the order
``POST /v1/recall`` gives over the same namespace; a selection that leaves the record out of
the caller's reach keeps it out of the vector half too. Family writes offer their records to
the write-behind embedder like native writes. PostgreSQL 17 + pgvector + AGE,
the embedded default embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.recall.test_hybrid import DEPLOY, OTHERS
from tests.spoke.test_dispatch_api import OWNER
from tests.support.cortex import CortexClient, MakeCortex
from tests.support.postgres import Database

QUESTION = "when do we stop shipping?"
TOKEN: dict[str, str] = {}


async def op(cortex: CortexClient, name: str, request: dict[str, Any]) -> Any:
    return await call(cortex, "POST", "/v1/spoke/memory", {"op": name, "request": request})


async def call(cortex: CortexClient, method: str, path: str, body: Any) -> Any:
    reply = await cortex.call(method, path, body, agent=None,
                              headers={"Authorization": f"Bearer {TOKEN['owner']}"})
    assert reply.status == 200, reply.text
    return reply.body


async def test_recall_is_the_native_hybrid_recall_within_the_reach(
        age_database: Database, make_cortex: MakeCortex, tmp_path: Path) -> None:
    TOKEN["owner"], digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} owner {OWNER}\n")
    cortex = await make_cortex(age_database.dsn, auth=TokenAuth.from_file(tmp_path / "tokens"))
    await op(cortex, "memory.subjects.ensure", {"space_id": "kb", "subject_id": "u1"})
    made = {}
    for context, text in [("c2", DEPLOY), *(("c1", other) for other in OTHERS)]:
        made[text] = (await op(cortex, "memory.records.create", {
            "space_id": "kb", "subject_id": "u1", "content": {"text": text},
            "placement": {"context_id": context}}))["refs"][0]
    # family writes offer their records to the write-behind embedder, as native writes do
    await cortex.embedded_behind(agent=None, headers={
        "Authorization": f"Bearer {TOKEN['owner']}"})
    native = await call(cortex, "POST", "/v1/recall", {"query": QUESTION, "namespace": "kb"})
    assert native["results"][0]["id"] == made[DEPLOY], native
    assert native["mode"] == "hybrid", native
    found = await op(cortex, "memory.recall", {"space_id": "kb", "query": QUESTION})
    ranked = [h["record"]["record_id"] for h in found["results"]]
    assert ranked[0] == made[DEPLOY]
    assert ranked == [h["id"] for h in native["results"]]
    narrowed = await op(cortex, "memory.recall", {
        "space_id": "kb", "query": QUESTION,
        "selection": {"mode": "contexts", "context_ids": ["c1"]}})
    kept = {h["record"]["record_id"] for h in narrowed["results"]}
    assert made[DEPLOY] not in kept and kept <= {made[t] for t in OTHERS}
