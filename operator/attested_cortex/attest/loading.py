"""Keys and keyring from a directory of mounted Secrets, reloaded when Kubernetes swaps them.

I/O at the edge. Called by the server at startup (``KeySource(root)``) and on every signed
write (``source.snapshot()``), by ``cortexctl audit verify --keys`` and by tests.

Layout under ``root`` (any mix; names starting with ``.`` are ignored):

* an identity directory (:mod:`~attested_cortex.attest.keyfiles`) — one per mounted
  AgentIdentity Secret; with ``private.pem`` the cortex can sign for that agent (Cortex
  custody), without it the key is only trusted for verification (Agent custody);
* ``*.json`` keyring files (``RawKeyringFile``), directly or inside a mounted directory.

Change detection is one ``readlink`` per mount: a Secret or ConfigMap volume publishes a
new version by atomically repointing its ``..data`` symlink, so the link target changes
exactly when the content does. Directories without ``..data`` fall back to ``stat`` of
their entries. A reload that fails keeps the previous snapshot and logs the path only.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from attested_cortex.attest import keyfiles
from attested_cortex.attest.keyring import KeyRevision, Keyring, build_keyring, parse_keyring_file
from attested_cortex.attest.keys import AgentKey
from attested_cortex.errors import CortexError, InvalidInputError
from attested_cortex.types import AgentId

logger = logging.getLogger(__name__)
DATA_LINK = "..data"


@dataclass(frozen=True, slots=True)
class KeySnapshot:
    """Everything loaded from the key root at one moment."""

    signing_keys: Mapping[AgentId, AgentKey] = field(default_factory=dict)
    keyring: Keyring = field(default_factory=lambda: Keyring({}))


class KeySource:
    """A reloading view of a key root; ``snapshot()`` is cheap when nothing changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._token: object = None
        self._snapshot: KeySnapshot | None = None

    def snapshot(self) -> KeySnapshot:
        """The current keys, reloading them first if any mount changed since last time."""
        token = change_token(self.root)
        if self._snapshot is None or token != self._token:
            self._reload(token)
        assert self._snapshot is not None
        return self._snapshot

    def _reload(self, token: object) -> None:
        try:
            self._snapshot = load_snapshot(self.root)
        except (CortexError, OSError) as exc:
            if self._snapshot is None:
                raise
            logger.warning(
                "keeping previous keys: reload of %s failed: %s", self.root, type(exc).__name__
            )
            return
        self._token = token


def change_token(root: Path) -> object:
    """A value that changes whenever any mounted key file under ``root`` changes."""
    children = sorted((e for e in _entries(root) if e.is_dir()), key=lambda e: e.name)
    return (_dir_token(root), tuple(_dir_token(Path(e.path)) for e in children))


def load_snapshot(root: Path) -> KeySnapshot:
    """Read every identity directory and keyring file under ``root``."""
    keys: dict[AgentId, AgentKey] = {}
    revisions: list[KeyRevision] = []
    for directory in [root, *(Path(e.path) for e in _entries(root) if e.is_dir())]:
        if keyfiles.is_identity_dir(directory):
            revisions += keyfiles.read_revisions(directory)
            if keyfiles.has_private_key(directory):
                key = keyfiles.read_identity(directory)
                keys[key.agent_id] = key
        revisions += _json_revisions(directory)
    return KeySnapshot(signing_keys=keys, keyring=build_keyring(_unique(revisions)))


def _json_revisions(directory: Path) -> list[KeyRevision]:
    found: list[KeyRevision] = []
    for entry in _entries(directory):
        if entry.name.endswith(".json") and entry.name != keyfiles.KEYRING_FILE and entry.is_file():
            try:
                found += parse_keyring_file(json.loads(Path(entry.path).read_text("utf-8")))
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"{entry.path} is not JSON", code="bad_keyring") from exc
    return found


def _unique(revisions: list[KeyRevision]) -> list[KeyRevision]:
    return list({(r.agent_id, r.public_key, r.revision): r for r in revisions}.values())


def _entries(directory: Path) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(directory) as it:
            return [e for e in it if not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def _dir_token(directory: Path) -> object:
    try:
        return os.readlink(directory / DATA_LINK)
    except OSError:
        return tuple(_stat_token(e) for e in sorted(_entries(directory), key=lambda e: e.name))


def _stat_token(entry: os.DirEntry[str]) -> tuple[str, int, int, int]:
    info = entry.stat()
    return (entry.name, info.st_mtime_ns, info.st_size, info.st_ino)
