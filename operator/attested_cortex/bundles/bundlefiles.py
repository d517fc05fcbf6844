"""The files of a bundle directory, opened so a manifest cannot reach past the bundle
(issue 37 item 10, ADR 0086). Called by :mod:`.importing` (``cortexctl import``).

A chunk's name must be a plain relative name of this build's layout
(``chunks/<table>-<nnnnnn>.copy``, :func:`~.formats.chunk_name`): no absolute path, no
``..``, nothing outside ``chunks/``. Every file is opened without following a symbolic link
(in the bundle directory's ``chunks/`` as well), must be a regular file (a FIFO, device or
directory is refused before a byte is read) of the size the manifest declares, and is read
to at most that size: a file that grows meanwhile is refused, never read to its end.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import CHUNKS_DIR
from attested_cortex.bundles.manifests import RawChunk

#: Largest keys file and manifest signature read (each far larger than any a cortex writes).
MAX_KEYS_BYTES: Final = 16 * 1024 * 1024
MAX_SIGNATURE_BYTES: Final = 64 * 1024
_CHUNK_NAME: Final = re.compile(rf"^{CHUNKS_DIR}/([a-z_]+)-[0-9]{{6}}\.copy$")
_OPEN_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def check_files(root: Path, chunks: Iterable[RawChunk]) -> None:
    """Before anything is read or any database asked: every chunk's name is this layout's
    name of its table, no name twice, and a present chunk is a regular file of its declared
    size (an absent one is refused as ``missing_chunk`` when its turn comes)."""
    seen: set[str] = set()
    for chunk in chunks:
        name = chunk["name"]
        found = _CHUNK_NAME.match(name) if isinstance(name, str) else None
        if found is None or found.group(1) != chunk["table"] or name in seen:
            raise BundleError("bad_chunk_name", str(name), "a chunk is named chunks/"
                              "<table>-<nnnnnn>.copy inside the bundle, once")
        seen.add(name)
        if not isinstance(chunk["bytes"], int) or chunk["bytes"] < 0:
            raise BundleError("bad_manifest", name, "a chunk's bytes are not a count")
        size = _size(root, name)
        if size is not None and size != chunk["bytes"]:
            raise BundleError("size_mismatch", name, f"the file holds {size} bytes, the "
                              f"manifest {chunk['bytes']}")


def read(root: Path, name: str, *, limit: int) -> bytes | None:
    """The bytes of the bundle's file ``name`` (a name of :func:`check_files` or a top-level
    file), None when absent; BundleError when it is not a regular file inside the bundle or
    holds more than ``limit`` bytes."""
    try:
        fd = _open(root, name)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise _not_regular(name)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise BundleError("size_mismatch", name, f"the file holds more than the {limit} "
                          "bytes the manifest declares")
    return data


def _size(root: Path, name: str) -> int | None:
    try:
        fd = _open(root, name)
    except FileNotFoundError:
        return None
    try:
        found = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(found.st_mode):
        raise _not_regular(name)
    return found.st_size


def _open(root: Path, name: str) -> int:
    """``name`` under ``root``, each component opened without following a link."""
    parts = name.split("/")
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise BundleError("bad_chunk_name", name, "not a plain name inside the bundle")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW,
                                dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:  # a link (ELOOP) or a file where a folder belongs
                raise _not_regular(name) from exc
            os.close(fd)
            fd = inner
        try:
            return os.open(parts[-1], _OPEN_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            raise
        except OSError as exc:  # ELOOP: a symbolic link
            raise _not_regular(name) from exc
    finally:
        os.close(fd)


def _not_regular(name: str) -> BundleError:
    return BundleError("not_a_regular_file", name, "a bundle's file is a regular file "
                       "inside its directory (not a link, device, FIFO or folder)")
