"""The transfer format of the spoke-memory family, ``spoke-memory-export/1``: pure.
Called by the service's ``spoke_transfer``.

An export is one canonical JSON document (sorted keys, no spaces, UTF-8) of a space's
subjects, live records and profile documents as the exporter is authorized for them; it is
cut into chunks of at most ``chunk_bytes``, each with its SHA-256, and the **manifest
digest** is the SHA-256 of the canonical JSON ``{"chunks": [digests], "format": FORMAT}``.
An import recomputes both: a corrupted chunk fails its digest when staged, a missing,
reordered or replayed chunk fails the strict ordinal order, and the whole fails the
manifest digest and the document's parse on the final chunk.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Final

FORMAT: Final = "spoke-memory-export/1"


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def chunked(document: dict[str, Any], chunk_bytes: int) -> list[tuple[bytes, str]]:
    """The document's bytes in chunks, each with its digest (at least one chunk)."""
    data = canonical({**document, "format": FORMAT})
    parts = [data[i:i + chunk_bytes] for i in range(0, len(data), chunk_bytes)] or [b""]
    return [(part, sha256(part)) for part in parts]


def manifest_digest(digests: Sequence[str]) -> str:
    """The manifest digest over the chunk digests, in order."""
    return sha256(canonical({"chunks": list(digests), "format": FORMAT}))


def parse(data: bytes) -> dict[str, Any]:
    """The document of reassembled chunks; ValueError when it is not one of this format."""
    document = json.loads(data.decode())
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    for name in ("subjects", "records", "profiles"):
        if not isinstance(document.get(name), list):
            raise ValueError(f"the document has no {name} list")
    return document
