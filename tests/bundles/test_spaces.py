"""The ``space`` content kind of the logical bundle (ADR 0070), pure: a space document
round-trips through the tar stream cut into wire chunks, and each way a bundle can be wrong
is refused with its code (the staging refusals over real HTTP are in tests/spoke)."""

from __future__ import annotations

import json
import tarfile
import tracemalloc
from typing import Any

import pytest

from attested_cortex.bundles import manifests, spaces, tarring
from attested_cortex.bundles.errors import BundleError

DOCUMENT: dict[str, list[dict[str, Any]]] = {
    "subjects": [{"subject_id": "u1", "kind": None}],
    "records": [{"subject_id": "u1", "kind": "note:fact", "context_id": None,
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


def sparse_member(name: str, real_size: int) -> bytes:
    """A GNU sparse member: a header with no data block whose sparse map declares
    ``real_size`` bytes (a reader that expands it makes that many zero bytes)."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    header = bytearray(info.tobuf(format=tarfile.GNU_FORMAT))
    header[386:398] = b"%011o\0" % (real_size - 1)  # one data byte after a hole to the end
    header[398:410] = b"%011o\0" % 1
    header[483:495] = b"%011o\0" % real_size
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header[:512])
    return bytes(header)


def test_a_sparse_member_is_refused_before_its_bytes_exist() -> None:
    """Issue 37 item 7: 2 KiB declaring 64 MiB was read member by member into memory."""
    files = spaces.space_files(DOCUMENT)
    name = files[0][0]
    bomb = sparse_member(name, 64 * 1024 * 1024)
    data = bomb + b"".join(tarring.member(n, d) for n, d in files[1:]) + tarring.END
    tracemalloc.start()
    try:
        with pytest.raises(BundleError) as caught:
            spaces.read_space(data, manifests.digest(dict(files)["manifest.json"]))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (caught.value.what, caught.value.where) == ("bad_archive", name)
    assert peak < 4 * 1024 * 1024, peak


def test_a_member_of_another_size_than_the_manifest_is_refused_unread() -> None:
    files = spaces.space_files(DOCUMENT)
    name, chunk = files[1]
    longer = [*files[:1], (name, chunk + b"x" * 4096), *files[2:]]
    assert refusal(longer) == "size_mismatch"


def one_row(table: str, row: bytes, document: dict[str, Any] | None = None) -> str:
    """The refusal of a bundle of ``document`` with ``row`` added to ``table``."""
    files = spaces.space_files(document or {**DOCUMENT, "profiles": []})
    name = f"chunks/{table}-000009.jsonl"
    line = row + b"\n"
    raw = json.loads(dict(files)["manifest.json"])
    raw["chunks"].append({"name": name, "table": table, "rows": 1, "bytes": len(line),
                          "sha256": manifests.digest(line)})
    raw["rows"][table] += 1
    return refusal([*files[:-1], (name, line), ("manifest.json", json.dumps(raw).encode())])


def record(content: str, *, kind: str = '"note:fact"', subject: str = "u1") -> bytes:
    return (f'{{"content":{content},"context_id":null,"kind":{kind},'
            f'"source_context_id":null,"subject_id":"{subject}"}}').encode()


def test_each_row_passes_the_wire_models_and_bounds() -> None:
    """Issue 37 item 8: a kind the wire refuses, a row nested 100,000 deep (RecursionError)
    and a ``structured`` deeper than the wire's 64 levels were staged and activated."""
    assert one_row("space_records", record('{"text":"t"}', kind='"Not:Valid Kind"')) == \
        "bad_row"
    deep = "[" * 100_000 + "]" * 100_000
    assert one_row("space_records", record('{"text":"t","structured":{"a":' + deep + "}}")) \
        == "bad_row"
    nested = '{"a":' * 200 + "1" + "}" * 200
    assert one_row("space_records", record('{"text":"t","structured":' + nested + "}")) \
        == "bad_row"
    assert one_row("space_records", record('{"text":"t"}', subject="nobody")) == "bad_row"
    assert one_row("space_profiles", b'{"kind":"Style!","subject_id":"u1","text":"t"}') == \
        "bad_row"
    assert one_row("space_subjects", b'{"kind":"x","subject_id":"u2"}') == "bad_row"
    shallow = '{"a":' * 40 + "1" + "}" * 40
    files = spaces.space_files({**DOCUMENT, "records": [{
        "subject_id": "u1", "kind": None, "context_id": None, "source_context_id": None,
        "content": {"text": "t", "structured": json.loads(shallow)}}]})
    chunks, digest = spaces.wire_chunks(files, 4096)
    assert spaces.read_space(b"".join(d for d, _ in chunks), digest)["records"][0][
        "content"]["structured"] == json.loads(shallow)
