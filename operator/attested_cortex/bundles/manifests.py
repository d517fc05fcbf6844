"""The manifest: every chunk with its SHA-256, the row counts, the chain head and the schema
version; and its signature by the cortex's audit signer. Pure.

Written last by :mod:`.exporting` and read first by :mod:`.importing`. The signature
(``manifest.sig.json``) is Ed25519 over the exact bytes of ``manifest.json``, so no
canonical form is needed: the bytes signed are the bytes read. Because the manifest holds
every chunk's digest (and ``keys.json``'s), one signature covers the whole bundle (ADR 0034).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any, TypedDict

from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.signing import sign, verify
from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import (
    CORTEX_KIND,
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    SIGNATURE,
    SPACE_KIND,
)


class RawChunk(TypedDict):
    """One chunk in the manifest."""

    name: str
    table: str
    rows: int
    bytes: int
    sha256: str


class RawSignature(TypedDict):
    """``manifest.sig.json``."""

    agent_id: str
    key_fingerprint: str
    signature: str


@dataclass(frozen=True, slots=True)
class Manifest:
    """A parsed manifest (``raw`` keeps the JSON for fields only a reader of the file needs)."""

    schema_version: int
    chunks: tuple[RawChunk, ...]
    rows: dict[str, int]
    columns: dict[str, list[str]]
    chain_events: int
    chain_head: str | None
    keys_sha256: str
    raw: dict[str, Any]


def digest(data: bytes) -> str:
    """SHA-256, hex: the digest of a chunk and of keys.json."""
    return hashlib.sha256(data).hexdigest()


def render(manifest: dict[str, Any]) -> bytes:
    """The manifest's file bytes (sorted keys, so the same bundle renders the same)."""
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION, **manifest},
                      indent=1, sort_keys=True).encode() + b"\n"


@dataclass(frozen=True, slots=True)
class SpaceManifest:
    """A parsed manifest of a ``space`` bundle (ADR 0070)."""

    chunks: tuple[RawChunk, ...]
    rows: dict[str, int]
    columns: dict[str, list[str]]


def _opened(data: bytes, kind: str) -> dict[str, Any]:
    """The manifest's JSON: this format, a version this build reads, the kind expected."""
    raw = json.loads(data)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT \
            or not isinstance(raw.get("version"), int):
        raise BundleError("bad_manifest", MANIFEST, f"not an {FORMAT} manifest")
    if raw["version"] > FORMAT_VERSION:
        raise BundleError("bad_manifest", MANIFEST, f"bundle version {raw['version']} is "
                          f"newer than this build reads ({FORMAT_VERSION}): upgrade cortexctl")
    found = raw.get("kind", CORTEX_KIND)
    if found != kind:
        raise BundleError("wrong_kind", MANIFEST, f"a {found!r} bundle, not a {kind!r} one: "
                          + ("a space is imported with memory.imports.stage"
                             if found == SPACE_KIND else "import it as what it is"))
    return raw


def parse(data: bytes) -> Manifest:
    """Read ``manifest.json`` of a whole cortex; refuse another format, a newer version or
    another kind."""
    try:
        raw = _opened(data, CORTEX_KIND)
        chain = raw["chain"]
        return Manifest(int(raw["schema_version"]), tuple(raw["chunks"]), dict(raw["rows"]),
                        dict(raw["columns"]), int(chain["events"]), chain["head"],
                        str(raw["keys_sha256"]), raw)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BundleError("bad_manifest", MANIFEST, f"unreadable manifest ({exc})") from exc


def parse_space(data: bytes) -> SpaceManifest:
    """Read ``manifest.json`` of a space bundle."""
    try:
        raw = _opened(data, SPACE_KIND)
        return SpaceManifest(tuple(raw["chunks"]), dict(raw["rows"]), dict(raw["columns"]))
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BundleError("bad_manifest", MANIFEST, f"unreadable manifest ({exc})") from exc


def signature_of(manifest: bytes, key: AgentKey) -> bytes:
    """``manifest.sig.json`` for ``manifest`` signed by ``key``."""
    raw: RawSignature = {"agent_id": key.agent_id, "key_fingerprint": key.public.fingerprint,
                         "signature": base64.b64encode(sign(key, manifest)).decode()}
    return json.dumps(raw, indent=1, sort_keys=True).encode() + b"\n"


def check_signature(manifest: bytes, signature: bytes, keyring: Keyring, *,
                    signer: str | None = None) -> str:
    """The agent that signed ``manifest``, or BundleError when a key of the keyring does not
    verify the signature (a signer the keyring does not know is refused too).

    ``signer``: the key id (SHA-256 of the public key, hex) of the only acceptable signer,
    the source cortex's audit signer (ADR 0064). A manifest signed by any other key is
    refused naming both key ids, even when that key is in the keyring: the bundle's own
    ``keys.json`` then proves nothing, since whoever made the bundle chose it. The key that
    verifies is the keyring's key with exactly that id (a SHA-256 of the key itself).
    """
    try:
        raw = json.loads(signature)
        agent, fingerprint = str(raw["agent_id"]), str(raw["key_fingerprint"])
        value = base64.b64decode(raw["signature"], validate=True)
    except (ValueError, KeyError, TypeError) as exc:
        raise BundleError("bad_manifest_signature", SIGNATURE, "unreadable signature") from exc
    if signer is not None and fingerprint != signer:
        raise BundleError("wrong_manifest_signer", SIGNATURE,
                          f"the manifest is signed by key {fingerprint} ({agent}); only key "
                          f"{signer} (the pinned source signer) is accepted")
    keys = [r for r in keyring.by_agent.get(agent, ()) if r.fingerprint == fingerprint]  # type: ignore[call-overload]
    if not keys:
        raise BundleError("bad_manifest_signature", SIGNATURE,
                          f"no trusted key {fingerprint[:16]}... of signer {agent}")
    if not any(verify(k.public_key, manifest, value) for k in keys):
        raise BundleError("bad_manifest_signature", SIGNATURE,
                          f"the signature of {agent} does not verify the manifest")
    return agent
