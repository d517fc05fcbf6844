"""The ``space`` content kind of the logical bundle (ADR 0070), pure: a space document
round-trips through the tar stream cut into wire chunks, and each way a bundle can be wrong
is refused with its code (the staging refusals over real HTTP are in tests/spoke)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from attested_cortex.bundles import manifests, spaces, tarring
from attested_cortex.bundles.errors import BundleError

DOCUMENT: dict[str, list[dict[str, Any]]] = {
    "subjects": [{"subject_id": "u1", "kind": None}],
    "records": [{"subject_id": "u1", "kind": "fact", "context_id": None,
                 "source_context_id": "c9", "content": {"text": "é\nline", "cognition": []}},
                {"subject_id": "u1", "kind": None, "context_id": "c1",
                 "source_context_id": None, "content": {"text": "x" * 3000}}],
    "profiles": [{"subject_id": "u1", "kind": "style", "text": "terse"}],
}


def stream(files: list[tuple[str, bytes]]) -> bytes:
    return b"".join(tarring.member(n, d) for n, d in files) + tarring.END


def test_a_space_round_trips_through_wire_chunks() -> None:
    files = spaces.space_files(DOCUMENT)
    assert [n for n, _ in files][-1] == "manifest.json"
    chunks, digest = spaces.wire_chunks(files, 1024)
    assert all(len(d) <= 1024 and manifests.digest(d) == s for d, s in chunks)
    assert spaces.read_space(b"".join(d for d, _ in chunks), digest) == DOCUMENT
    raw = json.loads(dict(files)["manifest.json"])
    assert (raw["format"], raw["kind"], raw["rows"]["space_records"]) == (
        "attested-cortex-bundle", "space", 2)
    assert "chain" not in raw and "keys_sha256" not in raw


def refusal(files: list[tuple[str, bytes]], digest: str | None = None) -> str:
    manifest = dict(files).get("manifest.json", b"")
    with pytest.raises(BundleError) as caught:
        spaces.read_space(stream(files), digest or manifests.digest(manifest))
    return caught.value.what


def test_each_wrong_bundle_is_refused() -> None:
    files = spaces.space_files(DOCUMENT)
    assert refusal(files, "0" * 64) == "manifest_mismatch"
    assert refusal(files[1:]) == "missing_chunk"
    assert refusal([files[0], ("extra.txt", b"x"), *files[1:]]) == "unlisted_file"
    changed = [(n, d.replace(b"terse", b"Terse")) for n, d in files]
    assert refusal(changed) == "digest_mismatch"
    assert refusal([files[0], files[0], *files[1:]]) == "bad_archive"
    with pytest.raises(BundleError) as caught:
        spaces.read_space(b"not a tar" * 100, "0" * 64)
    assert caught.value.what == "bad_archive"


def test_a_row_with_other_fields_is_refused() -> None:
    files = spaces.space_files({**DOCUMENT, "profiles": []})
    name = "chunks/space_profiles-000000.jsonl"
    row = b'{"kind":"style","subject_id":"u1","text":"t","more":1}\n'
    chunk = {"name": name, "table": "space_profiles", "rows": 1, "bytes": len(row),
             "sha256": manifests.digest(row)}
    raw = json.loads(dict(files)["manifest.json"])
    raw["chunks"].append(chunk)
    raw["rows"]["space_profiles"] = 1
    manifest = json.dumps(raw).encode()
    assert refusal([*files[:-1], (name, row), ("manifest.json", manifest)]) == "bad_row"
