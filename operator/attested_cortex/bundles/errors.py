"""The one error a bundle raises: what is wrong and where.

Raised by :mod:`.checking` (a digest, the chain or a signature does not verify), by
:mod:`.importing` (the target is not empty, its schema differs) and by :mod:`.manifests` (an
unreadable manifest). ``what`` is a short code a script can match (``digest_mismatch``,
``missing_chunk``, ``chain_broken``, ``bad_manifest_signature``, ``target_not_empty`` ...);
``where`` names the chunk, event sequence or table. Nothing is imported when it is raised.
"""

from __future__ import annotations

from attested_cortex.errors import InvalidInputError


class BundleError(InvalidInputError):
    """A bundle (or an import target) that must be refused; the message says what to do."""

    def __init__(self, what: str, where: str, message: str) -> None:
        super().__init__(f"{what} at {where}: {message}", code=what, where=where)
        self.what = what
        self.where = where
