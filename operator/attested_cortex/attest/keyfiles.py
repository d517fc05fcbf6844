"""The one on-disk format of an agent identity: a directory, as a key Secret mounts it.

I/O at the edge, small and synchronous. Called by ``cortexctl identity`` (writing and
reading), by :mod:`~attested_cortex.attest.loading` (the server's mounted Secrets) and by the
operator's Secret builder, whose Secret keys are exactly these file names:

=================  ======  =====================================================
file               mode    content
=================  ======  =====================================================
``agent-id``       0644    the agent id, UTF-8, no trailing newline needed
``private.pem``    0600    PKCS#8 PEM of the Ed25519 private key (absent in a
                           public-only directory, e.g. Agent custody)
``public.pem``     0644    SubjectPublicKeyInfo PEM of the public key
``fingerprint``    0644    lowercase hex SHA-256 of the raw 32-byte public key
``keyring.json``   0644    optional: every revision of this agent's key with its
                           validity window (``RawKeyringFile``); written on rotation
=================  ======  =====================================================

Reading checks that the three forms of the public key agree, so a half-updated
directory is refused rather than trusted.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from attested_cortex.attest.keyring import KeyRevision, parse_keyring_file, revision_of
from attested_cortex.attest.keys import (
    AgentKey,
    PublicIdentity,
    fingerprint_of,
    key_from_seed,
    private_pem,
    public_from_pem,
    public_pem,
    seed_from_pem,
)
from attested_cortex.errors import ConflictError, InvalidInputError, NotFoundError
from attested_cortex.types import AgentId, Fingerprint

AGENT_ID_FILE = "agent-id"
PRIVATE_FILE = "private.pem"
PUBLIC_FILE = "public.pem"
FINGERPRINT_FILE = "fingerprint"
KEYRING_FILE = "keyring.json"
_KEY_ID = re.compile(r"[0-9a-f]{64}")


def identity_files(key: AgentKey) -> dict[str, str]:
    """``key`` as the four identity files (name -> content), as a key Secret holds them."""
    public = key.public
    return {AGENT_ID_FILE: public.agent_id, PRIVATE_FILE: private_pem(key),
            PUBLIC_FILE: public_pem(public.public_key), FINGERPRINT_FILE: public.fingerprint}


def write_identity(directory: Path, key: AgentKey) -> None:
    """Create ``directory`` (0700) holding ``key``; refuses to overwrite an existing key."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    existing = [n for n in (PRIVATE_FILE, PUBLIC_FILE, AGENT_ID_FILE) if (directory / n).exists()]
    if existing:
        raise ConflictError(f"{directory} already holds {existing[0]}; refusing to overwrite a key")
    _write(directory / PRIVATE_FILE, private_pem(key), mode=0o600)
    public = key.public
    _write(directory / AGENT_ID_FILE, public.agent_id + "\n", mode=0o644)
    _write(directory / PUBLIC_FILE, public_pem(public.public_key), mode=0o644)
    _write(directory / FINGERPRINT_FILE, public.fingerprint + "\n", mode=0o644)


def read_identity(directory: Path) -> AgentKey:
    """Load the private key of an identity directory, checked against its public files."""
    public = read_public(directory)
    seed = seed_from_pem(_read(directory / PRIVATE_FILE))
    key = key_from_seed(public.agent_id, seed)
    if key.public != public:
        raise InvalidInputError(
            f"{directory}: private key does not match public.pem", code="bad_key"
        )
    return key


def read_public(directory: Path) -> PublicIdentity:
    """Load the public half of an identity directory."""
    agent_id = _read(directory / AGENT_ID_FILE).strip()
    if not agent_id:
        raise InvalidInputError(f"{directory}: agent-id is empty", code="bad_key")
    public = PublicIdentity(AgentId(agent_id), public_from_pem(_read(directory / PUBLIC_FILE)))
    recorded = _read(directory / FINGERPRINT_FILE) if _exists(directory, FINGERPRINT_FILE) else ""
    if recorded and recorded.strip() != public.fingerprint:
        message = f"{directory}: fingerprint does not match public.pem"
        raise InvalidInputError(message, code="bad_key")
    return public


def read_revisions(directory: Path) -> list[KeyRevision]:
    """Trusted revisions of an identity directory: ``keyring.json`` if present, else the key."""
    public = read_public(directory)
    if not _exists(directory, KEYRING_FILE):
        return [revision_of(public)]
    revisions = parse_keyring_file(_load_json(directory / KEYRING_FILE))
    if any(r.agent_id != public.agent_id for r in revisions):
        raise InvalidInputError(
            f"{directory}: keyring.json names another agent", code="bad_keyring"
        )
    return revisions


def is_identity_dir(directory: Path) -> bool:
    """Whether ``directory`` looks like an identity directory (has agent-id and public.pem)."""
    return _exists(directory, AGENT_ID_FILE) and _exists(directory, PUBLIC_FILE)


def has_private_key(directory: Path) -> bool:
    """Whether the directory holds a private key (Cortex custody) or only public files."""
    return _exists(directory, PRIVATE_FILE)


def _load_json(path: Path) -> object:
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{path} is not valid JSON", code="bad_keyring") from exc


def _exists(directory: Path, name: str) -> bool:
    return (directory / name).is_file()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise NotFoundError(f"{path} is missing", code="key_missing") from exc


def _write(path: Path, text: str, *, mode: int) -> None:
    # O_EXCL + explicit mode: the file is never readable by others, not even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)


def key_id(value: str) -> Fingerprint:
    """A key id (lowercase hex SHA-256 of the raw public key) from what a person has at hand:
    the id itself, a ``public.pem`` file (a signer Secret's, mounted alone), or an identity
    directory. ``cortexctl import --signer`` pins the source's audit signer with it."""
    if _KEY_ID.fullmatch(value):
        return Fingerprint(value)
    path = Path(value)
    if path.is_dir():
        return read_public(path).fingerprint
    if path.is_file():
        return fingerprint_of(public_from_pem(_read(path)))
    raise InvalidInputError(f"{value!r} is neither a key id (64 lowercase hex digits) nor a "
                            "public.pem file or identity directory", code="bad_key")
