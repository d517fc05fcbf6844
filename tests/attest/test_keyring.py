"""Trusted keys per agent with rotation windows; loading and reloading mounted Secrets."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from attested_cortex.attest import keyfiles
from attested_cortex.attest.keyring import (
    KeyRevision,
    build_keyring,
    parse_keyring_file,
    render_keyring_file,
)
from attested_cortex.attest.keys import AgentKey, generate_key
from attested_cortex.attest.levels import verify_stored
from attested_cortex.attest.loading import KeySource, load_snapshot
from attested_cortex.attest.payloads import link_payload
from attested_cortex.attest.signing import sign
from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId

AGENT = AgentId("k8s:team-a/planner")
ROTATED_AT = 1_767_225_600_000  # 2026-01-01T00:00:00Z


def rotated(old: AgentKey, new: AgentKey) -> list[KeyRevision]:
    return [
        KeyRevision(AGENT, old.public.public_key, revision=1, valid_until=ROTATED_AT),
        KeyRevision(AGENT, new.public.public_key, revision=2, valid_from=ROTATED_AT),
    ]


def test_links_signed_before_a_rotation_still_verify() -> None:
    old, new = generate_key(AGENT), generate_key(AGENT)
    keyring = build_keyring(rotated(old, new))
    payload = link_payload(
        src_id="0b1d6c2e-8a4f-4c3e-9d2a-5f6e7a8b9c0d",
        dst_id="7e3f1a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        relation="related_to", observed_by=AGENT, valid_from=ROTATED_AT - 10, valid_until=None,
    )
    before, after = ROTATED_AT - 1, ROTATED_AT + 1
    old_sig, new_sig = sign(old, payload.encode()), sign(new, payload.encode())
    assert verify_stored(payload, old_sig, keyring=keyring, signed_at_ms=before)
    assert not verify_stored(payload, old_sig, keyring=keyring, signed_at_ms=after)
    assert verify_stored(payload, new_sig, keyring=keyring, signed_at_ms=after)
    assert not verify_stored(payload, new_sig, keyring=keyring, signed_at_ms=before)
    assert not verify_stored(payload, None, keyring=keyring, signed_at_ms=after)


def test_window_is_half_open_and_newest_revision_first() -> None:
    old, new = generate_key(AGENT), generate_key(AGENT)
    keyring = build_keyring(rotated(old, new))
    assert [r.revision for r in keyring.keys_at(AGENT, ROTATED_AT)] == [2]
    assert [r.revision for r in keyring.keys_at(AGENT, ROTATED_AT - 1)] == [1]
    assert keyring.knows(AGENT) and not keyring.knows("someone-else")
    assert keyring.agents() == (AGENT,)


def test_keyring_file_round_trip() -> None:
    revisions = rotated(generate_key(AGENT), generate_key(AGENT))
    document = json.loads(json.dumps(render_keyring_file(revisions)))
    assert parse_keyring_file(document) == revisions


def _doc(**change: Any) -> dict[str, Any]:
    key = generate_key(AGENT).public
    entry = {"revision": 1, "public_key": key.public_b64, "fingerprint": key.fingerprint,
             "valid_from": None, "valid_until": None}
    return {"agent_id": AGENT, "keys": [{**entry, **change}]}


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"keys": []},
        {"agent_id": AGENT},
        {"agent_id": AGENT, "keys": ["x"]},
        _doc(public_key="AAAA"),
        _doc(public_key=None),
        _doc(fingerprint="0" * 64),
        _doc(valid_from="yesterday"),
        _doc(valid_until=True),
        _doc(revision=1.5),
    ],
)
def test_bad_keyring_documents_are_refused(document: Any) -> None:
    with pytest.raises(InvalidInputError):
        parse_keyring_file(document)


def _publish(mount: Path, files: dict[str, str], version: int) -> None:
    """Write ``files`` into ``mount`` the way the kubelet's atomic writer does."""
    payload_dir = mount / f"..2026_11_29_00_00_0{version}.{version}"
    payload_dir.mkdir(parents=True)
    for name, text in files.items():
        (payload_dir / name).write_text(text)
    tmp_link = mount / "..data_tmp"
    tmp_link.symlink_to(payload_dir.name)
    old = os.readlink(mount / "..data") if (mount / "..data").is_symlink() else None
    os.replace(tmp_link, mount / "..data")
    for name in files:
        if not (mount / name).is_symlink():
            (mount / name).symlink_to(f"..data/{name}")
    if old:
        for child in (mount / old).iterdir():
            child.unlink()
        (mount / old).rmdir()


def _identity_files(key: AgentKey, tmp: Path) -> dict[str, str]:
    staging = tmp / f"staging-{key.public.fingerprint[:8]}"
    keyfiles.write_identity(staging, key)
    return {p.name: p.read_text() for p in staging.iterdir()}


def test_secret_swap_is_picked_up_and_unchanged_mounts_are_not_reread(tmp_path: Path) -> None:
    root = tmp_path / "keys"
    first, second = generate_key(AGENT), generate_key(AGENT)
    _publish(root / "planner", _identity_files(first, tmp_path), version=1)
    source = KeySource(root)
    snapshot = source.snapshot()
    assert snapshot.signing_keys[AGENT].public == first.public
    assert source.snapshot() is snapshot  # nothing changed: no reload
    _publish(root / "planner", _identity_files(second, tmp_path), version=2)
    assert source.snapshot().signing_keys[AGENT].public == second.public


def test_a_broken_update_keeps_the_previous_keys(tmp_path: Path) -> None:
    root = tmp_path / "keys"
    key = generate_key(AGENT)
    files = _identity_files(key, tmp_path)
    _publish(root / "planner", files, version=1)
    source = KeySource(root)
    assert source.snapshot().signing_keys[AGENT].public == key.public
    _publish(root / "planner", {**files, "fingerprint": "0" * 64}, version=2)
    assert source.snapshot().signing_keys[AGENT].public == key.public


def test_public_only_mounts_and_keyring_files_feed_the_keyring(tmp_path: Path) -> None:
    cortex_agent, outside_agent = generate_key(AgentId("cortex-held")), generate_key(AGENT)
    keyfiles.write_identity(tmp_path / "held", cortex_agent)
    (tmp_path / "trust").mkdir()
    document = render_keyring_file(rotated(generate_key(AGENT), outside_agent))
    (tmp_path / "trust" / "planner.json").write_text(json.dumps(document))
    snapshot = load_snapshot(tmp_path)
    assert set(snapshot.signing_keys) == {"cortex-held"}
    assert snapshot.keyring.agents() == ("cortex-held", AGENT)
    assert len(snapshot.keyring.by_agent[AGENT]) == 2


def test_identity_keyring_json_carries_rotation_history(tmp_path: Path) -> None:
    old, new = generate_key(AGENT), generate_key(AGENT)
    keyfiles.write_identity(tmp_path / "planner", new)
    (tmp_path / "planner" / "keyring.json").write_text(
        json.dumps(render_keyring_file(rotated(old, new)))
    )
    keyring = load_snapshot(tmp_path).keyring
    assert [r.revision for r in keyring.by_agent[AGENT]] == [2, 1]


def test_unreadable_keyring_json_fails_the_first_load(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(InvalidInputError):
        KeySource(tmp_path).snapshot()
