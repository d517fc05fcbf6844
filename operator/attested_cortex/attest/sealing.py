"""Sealing rows at rest (issue 27 part 3, ADR 0056): ChaCha20-Poly1305 under a domain subkey.

A sealed value is ``nonce (12 random bytes) || ciphertext || tag (16 bytes)``, made with
``cryptography``'s IETF ChaCha20-Poly1305 under the master key version's subkey of one
domain (:mod:`.masterkeys`). The associated data binds it to its row and key version:
``"attested-cortex-v1-seal" 0 domain 0 row-id (16 bytes) version (4 bytes, big-endian)``,
so a sealed value copied to another row, relabelled with another version or read in another
domain does not open. The key version is stored beside the value (a column), not in it.

Called by :mod:`attested_cortex.service.resources.transcripts` (store, replay). Pure; no
cryptography of our own: a random nonce per value (2^32 values per key version keep the
collision risk under 2^-32, far past any cortex's row count).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

from attested_cortex.attest.masterkeys import Domain, KeyRing

NONCE_BYTES: Final = 12
TAG_BYTES: Final = 16
#: What sealing adds to a value's size (what the storage quota counts on top of it).
OVERHEAD: Final = NONCE_BYTES + TAG_BYTES
_LABEL: Final = b"attested-cortex-v1-seal\0"


class UnsealError(ValueError):
    """A sealed value does not open: altered, moved to another row, or its key version is
    not in the ring. Carries no key material and no part of the value."""


def associated_data(domain: Domain, row_id: uuid.UUID, version: int) -> bytes:
    """What a sealed value is bound to besides its key: domain, row and key version."""
    return _LABEL + domain.encode("ascii") + b"\0" + row_id.bytes + version.to_bytes(4, "big")


@dataclass(eq=False)
class Sealer:
    """Seals under the ring's current version, opens under any version it holds.

    ``seals`` False (``encryption.at_rest`` off with a key configured): new values are
    written plain, and values sealed before still open. :meth:`rekey` follows a reloaded
    ring (:mod:`.ringwatch`): a version's key never changes, so the cached ciphers stay."""

    ring: KeyRing
    seals: bool = True
    _aeads: dict[tuple[str, int], ChaCha20Poly1305] = field(
        default_factory=dict, repr=False, compare=False)

    @property
    def version(self) -> int:
        """The version new values are sealed under."""
        return self.ring.current

    def _aead(self, domain: Domain, version: int) -> ChaCha20Poly1305:
        found = self._aeads.get((domain, version))
        if found is None:
            found = self._aeads[(domain, version)] = ChaCha20Poly1305(
                self.ring.subkey(domain, version))
        return found

    def rekey(self, ring: KeyRing) -> None:
        """Seal under ``ring``'s current version from now on, open under its versions."""
        self.ring = ring

    def seal(self, domain: Domain, row_id: uuid.UUID, plain: bytes,
             version: int | None = None) -> tuple[int, bytes]:
        """(key version, sealed value) of ``plain`` for the row ``row_id``, under
        ``version`` (default: the current one; a batch that labels its rows with one version
        names it, as the ring may be reloaded while it runs)."""
        version = self.ring.current if version is None else version
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._aead(domain, version).encrypt(
            nonce, plain, associated_data(domain, row_id, version))
        return version, nonce + sealed

    def open(self, domain: Domain, row_id: uuid.UUID, version: int, sealed: bytes) -> bytes:
        """The plaintext of a value :meth:`seal` made; :class:`UnsealError` otherwise."""
        if version not in self.ring.keys:
            raise UnsealError(f"key version v{version} is not in the master key ring")
        if len(sealed) < OVERHEAD:
            raise UnsealError("the sealed value is shorter than its nonce and tag")
        try:
            return self._aead(domain, version).decrypt(
                sealed[:NONCE_BYTES], sealed[NONCE_BYTES:],
                associated_data(domain, row_id, version))
        except InvalidTag:
            raise UnsealError("the sealed value does not open under its row and key "
                              "version (altered or moved)") from None
