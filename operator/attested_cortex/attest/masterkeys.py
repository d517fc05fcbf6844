"""One key hierarchy per cortex (issue 27 part 2, seed 003 Deliverable 7, ADR 0050).

A **master key** (32 random bytes) is the root; nothing encrypts or MACs with it directly.
Each use gets its own **subkey** by HKDF-SHA256 with the versioned salt
:data:`SALT` (``attested-cortex-v1-storage``) and a domain ``info`` string
(:data:`DOMAINS`): ``memory``, ``transcripts``, ``audit``, ``secrets``, 32 bytes each.
Bumping the salt to ``-v2-`` gives entirely new subkeys from the same master.

A :class:`KeyRing` holds the master key's versions (the current one and those still needed
to read older rows) and answers subkeys by version. It is loaded from one of three places:

- the directory the operator's ``<cortex>-master-key`` Secret is mounted at
  (:func:`load_ring_dir`: a file ``current`` naming the version, ``v1``, ``v2``... each
  64 hex characters);
- one key file (:func:`load_key_file`, ``cortexctl serve --master-key-file``: 32 raw bytes
  or 64 hex characters; version 1);
- a passphrase (:func:`key_from_passphrase`, standalone use): Argon2id with the seed's
  parameters (:class:`Argon2Params`, tunable) and a 16-byte salt of the installation.

Key material never appears in a ``repr``, an error message or a log line: a
:class:`MasterKey` prints its version and a fingerprint only. Maintained primitives only
(``cryptography``'s HKDF and Argon2id); this module adds no cryptography of its own.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal, get_args

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from attested_cortex.errors import InvalidInputError

#: The subkey domains (HKDF ``info``); a new domain is a new name here, never a reused one.
Domain = Literal["memory", "transcripts", "audit", "secrets"]
DOMAINS: Final[tuple[Domain, ...]] = get_args(Domain)
#: The versioned HKDF salt: a new key schedule bumps ``v1``.
SALT: Final = b"attested-cortex-v1-storage"
KEY_BYTES: Final = 32
PASSPHRASE_SALT_BYTES: Final = 16
#: The file of the mounted Secret naming the current version (``v1``, ``v2``...).
CURRENT: Final = "current"
_VERSION = re.compile(r"^v([1-9][0-9]{0,5})$")


@dataclass(frozen=True)
class Argon2Params:
    """Argon2id cost (seed 003 D7: m = 64 MiB, t = 3, p = 4), tunable."""

    iterations: int = 3
    memory_kib: int = 64 * 1024
    lanes: int = 4


def derive_subkey(master: bytes, domain: Domain) -> bytes:
    """HKDF-SHA256(ikm=master, salt=:data:`SALT`, info=domain, length=32)."""
    if domain not in DOMAINS:
        raise ValueError(f"unknown key domain {domain!r}")
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=SALT,
                info=domain.encode("ascii")).derive(master)


def key_from_passphrase(passphrase: bytes, salt: bytes,
                        params: Argon2Params = Argon2Params()) -> bytes:
    """The 32-byte master key Argon2id derives from ``passphrase`` and ``salt``."""
    if not passphrase:
        raise InvalidInputError("the master key passphrase is empty", field="master_key")
    if len(salt) != PASSPHRASE_SALT_BYTES:
        raise InvalidInputError(f"the passphrase salt must be {PASSPHRASE_SALT_BYTES} bytes "
                                f"({2 * PASSPHRASE_SALT_BYTES} hex characters)",
                                field="master_key.salt")
    return Argon2id(salt=salt, length=KEY_BYTES, iterations=params.iterations,
                    lanes=params.lanes, memory_cost=params.memory_kib).derive(passphrase)


def generate_key() -> bytes:
    """32 bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)


def fingerprint(material: bytes) -> str:
    """A public name of a key (16 hex characters of SHA-256 over a fixed label and it):
    says which key is loaded without saying anything usable about it."""
    return hashlib.sha256(b"attested-cortex master key fingerprint\0" + material).hexdigest()[:16]


@dataclass(frozen=True)
class MasterKey:
    """One version of the master key; its subkeys are derived once, on first use."""

    version: int
    material: bytes = field(repr=False)
    _subkeys: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.material) != KEY_BYTES:
            raise InvalidInputError(f"master key v{self.version} must be {KEY_BYTES} bytes",
                                    field="master_key")

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.material)

    def subkey(self, domain: Domain) -> bytes:
        """The domain's 32-byte subkey under this version."""
        found = self._subkeys.get(domain)
        if found is None:
            found = self._subkeys[domain] = derive_subkey(self.material, domain)
        return found

    def __repr__(self) -> str:
        return f"MasterKey(version={self.version}, fingerprint={self.fingerprint})"


@dataclass(frozen=True)
class KeyRing:
    """The master key's versions: ``current`` writes, every listed version reads."""

    current: int
    keys: Mapping[int, MasterKey]

    def __post_init__(self) -> None:
        if self.current not in self.keys:
            raise InvalidInputError(f"the current master key version v{self.current} is not "
                                    "in the key ring", field="master_key")

    @property
    def versions(self) -> list[int]:
        return sorted(self.keys)

    def key(self, version: int | None = None) -> MasterKey:
        """The key of ``version`` (the current one by default)."""
        wanted = self.current if version is None else version
        try:
            return self.keys[wanted]
        except KeyError:
            raise InvalidInputError(f"master key version v{wanted} is not in the key ring",
                                    field="master_key") from None

    def subkey(self, domain: Domain, version: int | None = None) -> bytes:
        """The domain's subkey under ``version`` (the current one by default)."""
        return self.key(version).subkey(domain)

    def describe(self) -> dict[str, object]:
        """What may be shown (capabilities, logs): versions and fingerprints, no material."""
        return {"current": self.current, "versions": self.versions,
                "fingerprints": {f"v{v}": self.keys[v].fingerprint for v in self.versions}}

    @classmethod
    def single(cls, material: bytes, version: int = 1) -> KeyRing:
        return cls(current=version, keys={version: MasterKey(version, material)})


#: How every refusal of a start over the master key begins (ADR 0088): the operator finds
#: it in a crash-looping pod's termination message and reports ``MasterKeyRefused``.
REFUSED: Final = "master key refused"


def unlike_recorded(ring: KeyRing, recorded: Mapping[int, str]) -> str | None:
    """Why ``ring`` is not the key the cortex was sealed with (ADR 0088): the first of its
    versions whose fingerprint differs from the one ``recorded`` for it (None: every
    version it shares with the record is the recorded key). Fingerprints only."""
    for version in ring.versions:
        known, loaded = recorded.get(version), ring.keys[version].fingerprint
        if known is not None and known != loaded:
            return (f"master key v{version} is not the key this cortex was sealed with "
                    f"(loaded fingerprint {loaded}, the cortex's {known}): rows and audit MACs "
                    "written under it would never open under the right key; mount the "
                    "cortex's own key, or give a new key a new version")
    return None


def encode_key(material: bytes) -> str:
    """A key as the Secret and key files hold it: 64 lowercase hex characters."""
    return material.hex()


def _decode(text: bytes, where: str) -> bytes:
    """32 raw bytes as they are, else 64 hex characters (surrounding whitespace ignored)."""
    if len(text) == KEY_BYTES:
        return text
    try:
        material = bytes.fromhex(text.strip().decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        material = b""
    if len(material) != KEY_BYTES:
        raise InvalidInputError(f"{where}: a master key is {KEY_BYTES} raw bytes or "
                                f"{2 * KEY_BYTES} hex characters", field="master_key")
    return material


def _read(path: Path, field_name: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read {field_name} {path}: {exc.strerror}",
                                field=field_name) from exc


def load_key_file(path: Path) -> KeyRing:
    """One key in a file (version 1): ``cortexctl serve --master-key-file``."""
    return KeyRing.single(_decode(_read(path, "master_key.file"), str(path)))


def ring_files(material: Mapping[int, bytes], current: int) -> dict[str, str]:
    """The files of a key ring directory (the Secret's data before encoding):
    ``current`` -> ``v<N>``, ``v<N>`` -> hex."""
    files = {f"v{v}": encode_key(m) for v, m in sorted(material.items())}
    files[CURRENT] = f"v{current}"
    return files


def load_ring_dir(path: Path) -> KeyRing:
    """The key ring in a directory of :func:`ring_files` (the mounted Secret).

    Kubernetes mounts a Secret's keys as symlinks into a hidden ``..data`` directory; only
    the names ``current`` and ``v<N>`` are read.
    """
    pointer = _read(path / CURRENT, "master_key.dir").decode("ascii", "replace").strip()
    match = _VERSION.match(pointer)
    if match is None:
        raise InvalidInputError(f"{path / CURRENT} must name a version such as v1",
                                field="master_key.dir")
    keys = {}
    try:
        entries = sorted(p for p in path.iterdir() if _VERSION.match(p.name))
    except OSError as exc:
        raise InvalidInputError(f"cannot list master_key.dir {path}: {exc.strerror}",
                                field="master_key.dir") from exc
    for entry in entries:
        version = int(entry.name[1:])
        keys[version] = MasterKey(version, _decode(_read(entry, "master_key.dir"), str(entry)))
    return KeyRing(current=int(match.group(1)), keys=keys)
