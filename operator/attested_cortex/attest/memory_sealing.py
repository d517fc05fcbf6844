"""The memory cipher the store binds to its connections (issue 27 part 3, ADR 0056 item 5).

:class:`MemorySeal` is :class:`attested_cortex.store.memory_ciphers.MemoryCipher` over the
server's :class:`.sealing.Sealer`: ChaCha20-Poly1305 under the ``memory`` subkey, bound to
the row's id and key version, for a row's title, content and metadata; and the blind tokens
of :mod:`.blinding` under the same version's ``memory`` subkey for its lexemes (the label
``attested-cortex-v1-fts`` keeps the two uses apart). Built by
:func:`attested_cortex.server.assembling.open_services`; pure.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from attested_cortex.attest.blinding import blinder
from attested_cortex.attest.sealing import Sealer, UnsealError


@dataclass(frozen=True)
class MemorySeal:
    """Seals memory rows under the ring's current version; opens and keys under any."""

    sealer: Sealer

    @property
    def seals(self) -> bool:
        return self.sealer.seals

    @property
    def version(self) -> int:
        return self.sealer.version

    @property
    def versions(self) -> tuple[int, ...]:
        return tuple(sorted(self.sealer.ring.keys, reverse=True))

    def seal(self, row_id: uuid.UUID, plain: bytes) -> bytes:
        return self.sealer.seal("memory", row_id, plain)[1]

    def open(self, row_id: uuid.UUID, version: int, sealed: bytes) -> bytes | None:
        try:
            return self.sealer.open("memory", row_id, version, sealed)
        except UnsealError:
            return None

    # The blinder of the version's ``memory`` subkey (.blinding.blinder: one per key, found
    # by the key itself, so a ring reloaded by .sealing.Sealer.rekey is never answered from
    # another key's tokens).
    def key_text(self, text: str, version: int, *, legacy: bool = False) -> str:
        return blinder(self.sealer.ring.subkey("memory", version), legacy=legacy).key_text(text)

    def token(self, lexeme: str, version: int, *, legacy: bool = False) -> str:
        return blinder(self.sealer.ring.subkey("memory", version), legacy=legacy).token(lexeme)

    def key_binary(self, vector: bytes, version: int) -> bytes:
        return blinder(self.sealer.ring.subkey("memory", version)).key_binary(vector)
