"""The source's audit signer pinned (ADR 0064): ``import --signer`` accepts a manifest signed
by that key only. Without the pin a bundle re-made by someone else, signed by a key of their
own that they put in its keys.json, verifies under its own keys; with it, it is refused
naming both key ids, and nothing is imported."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hack.support.served import CORTEXCTL

from attested_cortex.attest.keyfiles import PUBLIC_FILE, key_id, write_identity
from attested_cortex.attest.keyring import render_keyring_file, revision_of
from attested_cortex.attest.keys import generate_key
from attested_cortex.bundles import BundleError, import_bundle, manifests
from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId
from tests.bundles.test_refusals import _rows

MALLORY = generate_key(AgentId("dev:mallory"))


def resigned_by_mallory(bundle: Path) -> None:
    """Mallory's key added to keys.json, the manifest's digest of it updated, signed by her."""
    keys = json.loads((bundle / "keys.json").read_bytes())
    keys.append(render_keyring_file([revision_of(MALLORY.public)]))
    data = json.dumps(keys).encode()
    (bundle / "keys.json").write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    manifest["keys_sha256"] = manifests.digest(data)
    raw = json.dumps(manifest, indent=1, sort_keys=True).encode() + b"\n"
    (bundle / "manifest.json").write_bytes(raw)
    (bundle / "manifest.sig.json").write_bytes(manifests.signature_of(raw, MALLORY))


def writer_key_id(keys: Path) -> str:
    return key_id(str(keys / "tester" / PUBLIC_FILE))


async def test_a_bundle_signed_by_another_key_is_refused_naming_both(
        bundle: Path, keys: Path, new_target: Callable[[], str]) -> None:
    resigned_by_mallory(bundle)
    pinned = writer_key_id(keys)
    target = new_target()
    with pytest.raises(BundleError) as refused:
        await import_bundle(target, bundle, signer=pinned)
    assert (refused.value.what, refused.value.where) == ("wrong_manifest_signer",
                                                         "manifest.sig.json")
    assert MALLORY.public.fingerprint in refused.value.message
    assert pinned in refused.value.message
    assert _rows(target) == 0
    # What the pin prevents: unpinned, the bundle verifies under the keys it carries.
    assert (await import_bundle(new_target(), bundle)).signed_by == "dev:mallory"


async def test_an_unsigned_bundle_is_refused_when_a_signer_is_pinned(
        bundle: Path, keys: Path, new_target: Callable[[], str]) -> None:
    (bundle / "manifest.sig.json").unlink()
    target = new_target()
    with pytest.raises(BundleError) as refused:
        await import_bundle(target, bundle, signer=writer_key_id(keys))
    assert refused.value.what == "unsigned_bundle" and _rows(target) == 0


def test_the_cli_imports_a_bundle_signed_by_the_pinned_public_key(
        bundle: Path, keys: Path, new_target: Callable[[], str]) -> None:
    target = new_target()
    done = subprocess.run([*CORTEXCTL, "import", "--bundle", str(bundle), "--database-url",
                           target, "--signer", str(keys / "tester" / PUBLIC_FILE)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "signed by dev:tester" in done.stdout and _rows(target) > 0


def test_a_key_id_comes_from_the_id_a_public_pem_or_an_identity_directory(
        tmp_path: Path) -> None:
    write_identity(tmp_path / "id", MALLORY)
    fingerprint = MALLORY.public.fingerprint
    assert key_id(fingerprint) == fingerprint
    assert key_id(str(tmp_path / "id" / PUBLIC_FILE)) == fingerprint
    assert key_id(str(tmp_path / "id")) == fingerprint
    with pytest.raises(InvalidInputError):
        key_id(fingerprint.upper())
