"""Each kind of bundle corruption, and a target that is not empty, is refused naming what
and where, with nothing imported. Rewrites that fix the chunk's digest in the manifest and
re-sign it (as someone holding the signer's key could) are still refused by the chain."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from hack.support.served import CORTEXCTL

from attested_cortex.attest.loading import load_snapshot
from attested_cortex.bundles import BundleError, import_bundle, manifests
from attested_cortex.types import AgentId
from tests.bundles.conftest import WRITER

EVENTS0 = "chunks/signed_events-000000.copy"
MEMORIES0 = "chunks/memories-000000.copy"


def resign(bundle: Path, keys: Path, name: str, data: bytes) -> None:
    """Replace a chunk, put its digest in the manifest, and sign the manifest again."""
    (bundle / name).write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    for chunk in manifest["chunks"]:
        if chunk["name"] == name:
            chunk.update(bytes=len(data), rows=data.count(b"\n"),
                         sha256=manifests.digest(data))
    raw = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    (bundle / "manifest.json").write_bytes(raw)
    key = load_snapshot(keys).signing_keys[AgentId(WRITER)]
    (bundle / "manifest.sig.json").write_bytes(manifests.signature_of(raw, key))


def changed_byte(bundle: Path, keys: Path) -> None:
    data = bytearray((bundle / MEMORIES0).read_bytes())
    data[data.index(b"deploy note")] = ord("D")
    (bundle / MEMORIES0).write_bytes(bytes(data))


def rewritten_memory(bundle: Path, keys: Path) -> None:
    data = (bundle / MEMORIES0).read_bytes()
    resign(bundle, keys, MEMORIES0, data.replace(b"deploy note 3:", b"deploy note 9:", 1))


def missing_chunk(bundle: Path, keys: Path) -> None:
    (bundle / "chunks/links-000000.copy").unlink()


def reordered_events(bundle: Path, keys: Path) -> None:
    lines = (bundle / EVENTS0).read_bytes().splitlines(keepends=True)
    lines[10], lines[11] = lines[11], lines[10]
    resign(bundle, keys, EVENTS0, b"".join(lines))


def dropped_tail(bundle: Path, keys: Path) -> None:
    lines = (bundle / EVENTS0).read_bytes().splitlines(keepends=True)
    resign(bundle, keys, EVENTS0, b"".join(lines[:-3]))


def forged_link_signature(bundle: Path, keys: Path) -> None:
    name = "chunks/links-000000.copy"
    rows = [line.split(b"\t") for line in (bundle / name).read_bytes().splitlines()]
    signed = next(r for r in rows if r[7] != b"\\N")
    signed[7] = signed[7][:-1] + (b"0" if signed[7][-1:] != b"0" else b"1")
    resign(bundle, keys, name, b"".join(b"\t".join(r) + b"\n" for r in rows))


def wrong_signature(bundle: Path, keys: Path) -> None:
    sig = json.loads((bundle / "manifest.sig.json").read_bytes())
    sig["signature"] = ("A" if sig["signature"][0] != "A" else "B") + sig["signature"][1:]
    (bundle / "manifest.sig.json").write_text(json.dumps(sig))


def edited_manifest(bundle: Path, keys: Path) -> None:
    raw = (bundle / "manifest.json").read_bytes()
    (bundle / "manifest.json").write_bytes(raw.replace(b'"events": ', b'"events":  '))


@pytest.mark.parametrize(("corrupt", "what", "where"), [
    (changed_byte, "digest_mismatch", MEMORIES0),
    (rewritten_memory, "rows_do_not_match_chain", "memory "),
    (missing_chunk, "missing_chunk", "chunks/links-000000.copy"),
    (reordered_events, "chain_broken", f"{EVENTS0} event 11"),
    (dropped_tail, "chain_truncated", "signed_events event"),
    (forged_link_signature, "bad_link_signature", "link "),
    (wrong_signature, "bad_manifest_signature", "manifest.sig.json"),
    (edited_manifest, "bad_manifest_signature", "manifest.sig.json"),
])
async def test_a_corrupt_bundle_is_refused_and_nothing_imported(
    bundle: Path, keys: Path, new_target: Callable[[], str],
    corrupt: Callable[[Path, Path], None], what: str, where: str,
) -> None:
    corrupt(bundle, keys)
    target = new_target()
    with pytest.raises(BundleError) as refused:
        await import_bundle(target, bundle)
    assert refused.value.what == what and refused.value.where.startswith(where)
    assert _rows(target) == 0


async def test_a_target_with_rows_is_refused(bundle: Path, keys: Path,
                                             new_target: Callable[[], str]) -> None:
    target = new_target()
    await import_bundle(target, bundle)
    before = _rows(target)
    with pytest.raises(BundleError) as refused:
        await import_bundle(target, bundle)
    assert refused.value.what == "target_not_empty" and _rows(target) == before
    # The operator's import Job runs with already_ok: the same bundle again is reported,
    # nothing copied; a bundle whose chain ends elsewhere is still refused.
    again = await import_bundle(target, bundle, already_ok=True)
    assert again.already and again.chain_events > 0 and _rows(target) == before
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    manifest["chain"]["events"] -= 1
    raw = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    (bundle / "manifest.json").write_bytes(raw)
    key = load_snapshot(keys).signing_keys[AgentId(WRITER)]
    (bundle / "manifest.sig.json").write_bytes(manifests.signature_of(raw, key))
    with pytest.raises(BundleError) as refused:
        await import_bundle(target, bundle, already_ok=True)
    assert refused.value.what == "target_not_empty" and _rows(target) == before


def test_the_cli_names_the_refusal_and_exits_1(bundle: Path, keys: Path,
                                               new_target: Callable[[], str]) -> None:
    import subprocess

    reordered_events(bundle, keys)
    target = new_target()
    done = subprocess.run([*CORTEXCTL, "import", "--bundle", str(bundle), "--database-url",
                           target, "--keys", str(keys)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "chain_broken" in done.stderr and "event 11" in done.stderr
    assert _rows(target) == 0


def renamed(bundle: Path, keys: Path, name: str, new: str) -> None:
    """The manifest names chunk ``name`` ``new`` (re-signed, as the signer's key holder
    could); the file itself stays where it was."""
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    for chunk in manifest["chunks"]:
        if chunk["name"] == name:
            chunk["name"] = new
    raw = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    (bundle / "manifest.json").write_bytes(raw)
    key = load_snapshot(keys).signing_keys[AgentId(WRITER)]
    (bundle / "manifest.sig.json").write_bytes(manifests.signature_of(raw, key))


def outside(bundle: Path) -> Path:
    """A copy of the memories chunk outside the bundle, byte for byte what it lists."""
    copy = bundle.parent / "elsewhere" / "memories.copy"
    copy.parent.mkdir(exist_ok=True)
    copy.write_bytes((bundle / MEMORIES0).read_bytes())
    return copy


def dotdot_name(bundle: Path, keys: Path) -> None:
    outside(bundle)
    renamed(bundle, keys, MEMORIES0, "../elsewhere/memories.copy")


def absolute_name(bundle: Path, keys: Path) -> None:
    renamed(bundle, keys, MEMORIES0, str(outside(bundle)))


def linked_chunk(bundle: Path, keys: Path) -> None:
    copy = outside(bundle)
    (bundle / MEMORIES0).unlink()
    (bundle / MEMORIES0).symlink_to(copy)


def linked_folder(bundle: Path, keys: Path) -> None:
    (bundle.parent / "elsewhere").mkdir()
    (bundle / "chunks").rename(bundle.parent / "elsewhere" / "chunks")
    (bundle / "chunks").symlink_to(bundle.parent / "elsewhere" / "chunks")


def longer_chunk(bundle: Path, keys: Path) -> None:
    with (bundle / MEMORIES0).open("ab") as handle:
        handle.write(b"x" * 4096)


@pytest.mark.parametrize(("corrupt", "what", "where"), [
    (dotdot_name, "bad_chunk_name", "../elsewhere"),
    (absolute_name, "bad_chunk_name", "/"),
    (linked_chunk, "not_a_regular_file", MEMORIES0),
    (linked_folder, "not_a_regular_file", EVENTS0),
    (longer_chunk, "size_mismatch", MEMORIES0),
])
async def test_a_bundle_reaches_no_file_outside_itself(
    bundle: Path, keys: Path, corrupt: Callable[[Path, Path], None], what: str, where: str,
) -> None:
    """Issue 37 item 10: chunk names were joined to the bundle directory unchecked, so a
    manifest read ``../../etc/hostname``, ``/etc/hostname`` or a link to ``/dev/zero``.
    Refused before any database is asked (the target here does not exist)."""
    corrupt(bundle, keys)
    with pytest.raises(BundleError) as refused:
        await import_bundle("postgresql://nobody@127.0.0.1:1/none", bundle)
    assert refused.value.what == what and refused.value.where.startswith(where)


def test_a_chunk_linked_to_a_device_is_refused_by_the_cli(bundle: Path, keys: Path,
                                                         new_target: Callable[[], str]) -> None:
    import subprocess

    (bundle / MEMORIES0).unlink()
    (bundle / MEMORIES0).symlink_to("/dev/zero")
    target = new_target()
    done = subprocess.run([*CORTEXCTL, "import", "--bundle", str(bundle), "--database-url",
                           target], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith("cortexctl import: refused, nothing imported: "
                                  f"not_a_regular_file at {MEMORIES0}"), done.stderr
    assert _rows(target) == 0


def _rows(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT (SELECT count(*) FROM signed_events) + (SELECT count(*) "
                           "FROM memories) + (SELECT count(*) FROM links) + (SELECT count(*) "
                           "FROM agent_usage)").fetchone()
    assert row is not None
    return int(row[0])
