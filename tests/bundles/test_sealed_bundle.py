"""A bundle of a cortex with encryption at rest (ADR 0056): sealed frames and memories travel
sealed with their key version, so the bundle holds no transcript or memory text and its
chain verifies; a cortex holding the same master key replays and reads them, one with
another key reads them as unreadable (on a cortex that recorded the first key, another one
does not start: tests/server/test_key_checks.py)."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hack.support.pgservers import APP_ROLE

from attested_cortex.attest import masterkeys as mk
from attested_cortex.attest.loading import load_snapshot
from attested_cortex.bundles import DirectorySink, export_bundle, import_bundle
from attested_cortex.store.dumping import owner_connection
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.bundles.conftest import SERVER, WRITER
from tests.support.cortex import CortexClient, MakeCortex


async def sealed_cortex(make_cortex: MakeCortex, dsn: str, keys: Path, key: Path,
                        **more: Any) -> CortexClient:
    return await make_cortex(dsn, migrated=False, **{**SERVER, "keys_dir": keys,
                                                     "master_key": {"file": key}, **more})


async def replayed(client: CortexClient, memory_id: str) -> Any:
    reply = await client.call("GET", f"/v1/memories/{memory_id}/replay?full=true")
    assert reply.status == 200, reply.text
    (transcript,) = reply.body["transcripts"]
    return transcript.get("content") if transcript["readable"] else "unreadable"


async def test_a_sealed_bundle_is_read_with_the_same_key_only(
        make_cortex: MakeCortex, new_target: Callable[[], str], keys: Path,
        tmp_path: Path) -> None:
    key, other = tmp_path / "master.key", tmp_path / "other.key"
    key.write_bytes(mk.generate_key())
    other.write_bytes(mk.generate_key())
    source_dsn = new_target()
    await migrate(source_dsn, app_role=APP_ROLE)
    source = await sealed_cortex(make_cortex, source_dsn, keys, key,
                                 encryption={"at_rest": True})
    text = f"secret-{secrets.token_hex(12)}-plaintext"
    stored = await source.call("POST", "/v1/transcripts", {"namespace": "kb/ops",
                                                          "content": text})
    assert stored.status == 201, stored.text
    note = f"secret-{secrets.token_hex(12)}-memory"
    memory = await source.store("kb/ops", note, citations=[
        {"transcript_id": stored.body["id"], "start": 0, "end": 6}])

    out = tmp_path / "bundle"
    snapshot = load_snapshot(keys)
    async with owner_connection(source_dsn) as conn:
        await export_bundle(conn, DirectorySink(out), keyring=snapshot.keyring,
                            signer=snapshot.signing_keys[AgentId(WRITER)])
    held = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    for secret in (text, note):  # sealed memories travel sealed too (ADR 0065)
        assert secret.encode() not in held and secret.encode().hex().encode() not in held

    target = new_target()
    await import_bundle(target, out)
    same = await sealed_cortex(make_cortex, target, keys, key)
    assert await replayed(same, memory["id"]) == text
    assert (await same.call("GET", f"/v1/memories/{memory['id']}")).body["content"] == note
    deep = (await same.call("GET", "/v1/audit/verify?deep=true")).body
    assert deep["ok"] and deep["deep"]["mismatch_count"] == 0, deep
    # another key: on the cortex that recorded this one, refused (ADR 0088); on another
    # import of the bundle (a bundle carries no key check), unreadable
    elsewhere = new_target()
    await import_bundle(elsewhere, out)
    stranger = await sealed_cortex(make_cortex, elsewhere, keys, other)
    assert await replayed(stranger, memory["id"]) == "unreadable"
