"""Master key rotation without a restart (issue 27 part 2, ADR 0066) on a real ``cortexctl
serve`` process and PostgreSQL: the ring directory (the Secret's layout) gains ``v2`` as
current while the server runs; within the poll interval the next transcript is sealed under
v2 and the next audit MAC too, the frame sealed under v1 still replays, capabilities and the
log name the new version's fingerprint (never the key), and a later change of ``v1``'s
material is refused with the ring in use kept."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import yaml
from hack.support.served import serve
from hack.support.waiting import wait_until

from attested_cortex.attest import masterkeys as mk

HEADERS = {"X-Agent-Id": "agent:rotator", "Content-Type": "application/json"}


def call(base: str, method: str, path: str, body: object | None = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + path, data=data, method=method, headers=HEADERS)
    with urllib.request.urlopen(request, timeout=10) as reply:
        return json.loads(reply.read())


def write_ring(path: Path, material: dict[int, bytes], current: int) -> None:
    """Write the files as the kubelet publishes a Secret: each whole, ``current`` last."""
    path.mkdir(exist_ok=True)
    files = mk.ring_files(material, current)
    for name in [*(n for n in files if n != mk.CURRENT), mk.CURRENT]:
        (path / f".{name}.tmp").write_text(files[name])
        os.replace(path / f".{name}.tmp", path / name)


def store_cited(base: str, text: str) -> tuple[str, str]:
    """(transcript id, id of a memory citing it)."""
    stored = call(base, "POST", "/v1/transcripts", {"namespace": "chat/a", "content": text})
    memory = call(base, "POST", "/v1/memories", {
        "namespace": "chat/a", "content": f"about {stored['id']}",
        "citations": [{"transcript_id": stored["id"], "start": 0, "end": 10}]})
    return str(stored["id"]), str(memory["id"])


def replayed(base: str, memory_id: str) -> object:
    (transcript,) = call(base, "GET", f"/v1/memories/{memory_id}/replay?full=true")[
        "transcripts"]
    return transcript.get("content") if transcript["readable"] else "unreadable"


def test_a_rotated_ring_is_used_without_a_restart(migrated_pg15_dsn: str,
                                                  tmp_path: Path) -> None:
    v1, v2, forged = mk.generate_key(), mk.generate_key(), mk.generate_key()
    ring = tmp_path / "ring"
    write_ring(ring, {1: v1}, 1)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "master_key": {"dir": str(ring), "reload_interval_ms": 100},
        "encryption": {"at_rest": True},
        "transcripts": {"enabled": True, "namespaces": [{"namespace": "chat/**"}]}}))
    fingerprint = mk.MasterKey(2, v2).fingerprint
    with serve(migrated_pg15_dsn, tmp_path, "--config", str(config)) as server, \
            psycopg.connect(migrated_pg15_dsn, autocommit=True) as db:
        old, old_memory = store_cited(server.base, "turn 1: sealed under the first key")

        write_ring(ring, {1: v1, 2: v2}, 2)  # the rotation, as `kubectl patch secret` makes it
        wait_until(lambda: call(server.base, "GET", "/v1/capabilities")["encryption"][
            "master_key"]["current"] == 2, seconds=10, interval_s=0.05,
            what="the server using v2")
        new, _ = store_cited(server.base, "turn 2: sealed under the second key")
        versions = dict(db.execute("SELECT id::text, key_version FROM transcripts").fetchall())
        assert versions == {old: 1, new: 2}  # unless the re-sealer ran: it waits 30 s idle
        assert replayed(server.base, old_memory) == "turn 1: sealed under the first key"
        (mac_version,) = db.execute("SELECT key_version FROM signed_event_macs "
                                    "ORDER BY sequence DESC LIMIT 1").fetchone() or (None,)
        assert mac_version == 2  # the keyed chain follows the ring too
        verified = call(server.base, "GET", "/v1/audit/verify")
        assert verified["ok"] and verified["keyed"]["ok"], verified
        assert verified["keyed"]["key_versions"] == [1, 2]

        caps = call(server.base, "GET", "/v1/capabilities")["encryption"]
        assert caps["master_key"]["fingerprints"]["v2"] == fingerprint
        assert caps["master_key_reload"]["reloads"] == 1 and caps["master_key_reload"][
            "refused"] is None

        write_ring(ring, {1: forged, 2: v2}, 2)  # v1 replaced: rows under it would be lost
        wait_until(lambda: call(server.base, "GET", "/v1/capabilities")["encryption"][
            "master_key_reload"]["refused"] is not None, seconds=10, interval_s=0.05,
            what="the changed v1 refused")
        caps = call(server.base, "GET", "/v1/capabilities")["encryption"]
        assert "v1 changed its material" in caps["master_key_reload"]["refused"]["reason"]
        assert caps["master_key"]["fingerprints"]["v1"] == mk.MasterKey(1, v1).fingerprint
        assert replayed(server.base, old_memory) == "turn 1: sealed under the first key"
    log = server.log.read_text()
    assert "master key ring reloaded" in log and fingerprint in log
    for material in (v1, v2, forged):
        assert material.hex() not in log
        assert mk.derive_subkey(material, "audit").hex() not in log
