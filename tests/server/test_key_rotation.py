"""Rotation of the master key under load (issue 27 part 2, ADR 0056) on a real server and
PostgreSQL: transcripts stored plain and under v1; the Secret's directory gains v2 as
current; the server's re-sealing worker moves every frame to v2 in small batches while
stores and full replays continue against it: at every step, every transcript stored so far
replays readable and equal to what was stored (one full replay per memory, together); the
deep audit then finds every row matching its latest record (``transcript.resealed``), and a
server holding only v2 (v1 retired, as capabilities allowed) reads everything."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hack.support.waiting import Pending, await_until

from attested_cortex.attest import masterkeys as mk
from tests.support.cortex import CortexClient, MakeCortex

TRANSCRIPTS = {"enabled": True, "namespaces": [{"namespace": "chat/**"}]}


def ring_dir(path: Path, material: dict[int, bytes], current: int) -> dict[str, Any]:
    path.mkdir(exist_ok=True)
    for name, text in mk.ring_files(material, current).items():
        (path / name).write_text(text)
    return {"dir": path}


def said(i: int) -> str:
    """The text of transcript ``i``."""
    return f"turn {i}: the quarterly report is late " * 20


async def store_cited(client: CortexClient, i: int) -> str:
    """A transcript and a memory citing it; the memory's id (what replays ask for)."""
    stored = await client.call("POST", "/v1/transcripts", {
        "namespace": "chat/a", "content": said(i)})
    assert stored.status == 201, stored.text
    memory = await client.store("chat/a", f"finding {i}", citations=[
        {"transcript_id": stored.body["id"], "start": 0, "end": 10}])
    return str(memory["id"])


async def replayed(client: CortexClient, memory_id: str) -> str | None:
    """The whole transcript a memory cites as a full replay answers it; None: unreadable."""
    reply = await client.call("GET", f"/v1/memories/{memory_id}/replay?full=true")
    assert reply.status == 200, reply.text
    (transcript,) = reply.body["transcripts"]
    return str(transcript["content"]) if transcript["readable"] else None


async def readable(client: CortexClient, memory_id: str) -> bool:
    return await replayed(client, memory_id) is not None


async def unreadable(client: CortexClient, ids: list[str]) -> dict[int, str | None]:
    """Every transcript whose replay is not readable or not what was stored (none, when all
    read back), by its index: all replayed together."""
    texts = await asyncio.gather(*(replayed(client, m) for m in ids))
    return {i: text for i, text in enumerate(texts) if text != said(i)}


async def frames(client: CortexClient) -> dict[str, int]:
    reply = await client.call("GET", "/v1/capabilities")
    return dict(reply.body["encryption"]["transcript_frames_by_key_version"])


async def test_rotation_under_load_keeps_every_row_readable(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path) -> None:
    v1, v2 = mk.generate_key(), mk.generate_key()
    dsn = migrated_pg15_dsn
    plain = await make_cortex(dsn, migrated=False, transcripts=TRANSCRIPTS,
                              master_key=ring_dir(tmp_path / "r1", {1: v1}, 1))
    ids = [await store_cited(plain, i) for i in range(8)]  # encryption off: plain frames
    first = await make_cortex(dsn, migrated=False, transcripts=TRANSCRIPTS,
                              master_key=ring_dir(tmp_path / "r1b", {1: v1}, 1),
                              encryption={"at_rest": True, "reseal_batch": 4})
    ids += [await store_cited(first, i) for i in range(8, 24)]
    # the first sealing server also seals the plain frames (at_rest on seals what exists)
    await await_until(lambda: _only(first, "v1"), what="every frame sealed under v1",
                      seconds=30, interval_s=0.05)

    rotated = await make_cortex(dsn, migrated=False, transcripts=TRANSCRIPTS,
                                master_key=ring_dir(tmp_path / "r2", {1: v1, 2: v2}, 2),
                                encryption={"at_rest": True, "reseal_batch": 2,
                                            "reseal_pause_ms": 30})
    seen: list[dict[str, int]] = []
    replays = 0
    while (counts := await frames(rotated)).keys() != {"v2"}:
        seen.append(counts)
        assert len(seen) < 400, f"rotation did not finish: {counts}"
        ids.append(await store_cited(rotated, len(ids)))  # stores go on: sealed under v2
        assert await unreadable(rotated, ids) == {}, counts  # every row, at every step
        replays += len(ids)
    assert any("v1" in c and "v2" in c for c in seen), seen  # observed mid-way, under load
    assert counts == {"v2": len(ids)} and replays >= 25
    report = (await rotated.call("GET", "/v1/audit/verify?deep=true")).body
    assert report["ok"] and report["deep"]["mismatch_count"] == 0, report
    assert report["deep"]["transcripts"] == len(ids)

    retired = await make_cortex(dsn, migrated=False, transcripts=TRANSCRIPTS,
                                master_key=ring_dir(tmp_path / "r3", {2: v2}, 2))
    assert await unreadable(retired, ids) == {}
    # v2 retired too early (a ring of v3 only): capabilities name it, replays say unreadable
    early = await make_cortex(dsn, migrated=False, transcripts=TRANSCRIPTS,
                              master_key=ring_dir(tmp_path / "r4", {3: mk.generate_key()}, 3))
    caps = (await early.call("GET", "/v1/capabilities")).body["encryption"]
    assert caps["versions_missing_from_ring"] == ["v2"]
    assert not await readable(early, ids[0])


async def _only(client: CortexClient, version: str) -> bool | Pending:
    counts = await frames(client)
    return counts.keys() == {version} or Pending(counts)
