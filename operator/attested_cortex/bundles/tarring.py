"""A bundle as a tar stream: each file a ustar member, made as it is exported. Pure.

Used by ``GET /v1/export`` so a bundle of any size streams with one chunk in memory;
``cortexctl export --server`` unpacks it with :mod:`tarfile` into the same directory layout.
"""

from __future__ import annotations

import tarfile

_BLOCK = 512
#: Two zero blocks end a tar archive.
END = bytes(2 * _BLOCK)


def member(name: str, data: bytes, *, mtime: int = 0) -> bytes:
    """The header, the data and the padding of one regular file."""
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), mtime, 0o644
    padding = (-len(data)) % _BLOCK
    return info.tobuf(format=tarfile.PAX_FORMAT) + data + bytes(padding)
