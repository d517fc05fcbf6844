"""The master key ring as it is now: loaded at start, reloaded when its mounted Secret
changes (issue 27 part 2, rotation without a restart; ADR 0066).

Kubernetes updates a mounted Secret in place (it repoints the volume's ``..data`` link), so a
version added to ``<cortex>-master-key`` and ``current`` moved to it reach the running pods
within the kubelet's sync period. :class:`RingSource` notices it (:meth:`RingSource.poll`:
one ``readlink``, or a ``stat`` per file outside Kubernetes, as :mod:`.loading` does for
agent keys) and reloads the ring; the server's poll loop
(:mod:`attested_cortex.service.workers.ringreloading`) then :meth:`RingSource.adopt`\\ s it on
the event loop, and every holder of the ring follows: the transcript :class:`.sealing.Sealer`
(a listener) and the keyed chain's :class:`.keyedchain.LiveSeal` (reads :attr:`ring`).

A reloaded ring is **refused** (the ring in use is kept, the refusal logged and shown in
capabilities) when a version it shares with the ring in use has other material: a version
names one key for good, since rows and MACs record the version, not the key, and a
replaced ``v1`` would make every row sealed under it unreadable. A malformed or half-written
ring (``current`` naming a version not yet there) is likewise kept out until it is whole.
Dropping a version is allowed: that is the end of a rotation (docs/keys.md says when).

Only versions and fingerprints are ever logged or shown (:meth:`.masterkeys.KeyRing.describe`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from attested_cortex.attest.loading import change_token
from attested_cortex.attest.masterkeys import KeyRing, load_ring_dir
from attested_cortex.errors import CortexError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Refusal:
    """Why the last changed ring was not adopted (no material, versions and fingerprints)."""

    at: datetime
    reason: str


def conflict(current: KeyRing, new: KeyRing) -> str | None:
    """Why ``new`` may not replace ``current`` (None: it may)."""
    for version in sorted(set(current.keys) & set(new.keys)):
        was, now = current.keys[version].fingerprint, new.keys[version].fingerprint
        if was != now:
            return (f"master key v{version} changed its material (fingerprint {was} -> {now}): "
                    "a version names one key for good; add a new version instead")
    return None


class RingSource:
    """The ring in use, and (for a ring directory) what reloads it."""

    def __init__(self, ring: KeyRing, directory: Path | None = None) -> None:
        self.ring = ring
        self.directory = directory
        self.reloads = 0
        self.reloaded_at: datetime | None = None
        self.refusal: Refusal | None = None
        self._listeners: list[Callable[[KeyRing], None]] = []
        self._token: object = None if directory is None else change_token(directory)

    @property
    def watching(self) -> bool:
        """Whether the ring can change while the server runs (a mounted ring directory)."""
        return self.directory is not None

    def listen(self, callback: Callable[[KeyRing], None]) -> None:
        """Call ``callback`` with every ring adopted from now on."""
        self._listeners.append(callback)

    def poll(self) -> KeyRing | None:
        """The ring the directory holds now, when it changed since the last poll and may be
        adopted; None otherwise. Reads files: call it off the event loop."""
        if self.directory is None:
            return None
        token = change_token(self.directory)
        if token == self._token:
            return None
        try:
            new = load_ring_dir(self.directory)
        except (CortexError, OSError) as exc:  # half-written, or a version not there yet
            self.refuse(f"the changed ring does not load: {exc}")
            return None  # token kept: the next poll tries again
        self._token = token
        why = conflict(self.ring, new)
        if why is not None:
            self.refuse(why)
            return None
        if new.describe() == self.ring.describe():
            return None
        return new

    def adopt(self, ring: KeyRing) -> None:
        """Use ``ring`` from now on (on the event loop: no append or seal is between reading
        the version and using its key when this runs)."""
        previous = self.ring.describe()
        self.ring = ring
        self.reloads += 1
        self.reloaded_at = datetime.now(UTC)
        self.refusal = None
        for callback in self._listeners:
            callback(ring)
        log.info("master key ring reloaded: %s (was %s)", ring.describe(), previous)

    def refuse(self, reason: str) -> None:
        """Keep the ring in use and report why a changed one was not adopted."""
        if self.refusal is None or self.refusal.reason != reason:
            log.error("master key ring not reloaded, the ring in use is kept: %s", reason)
        self.refusal = Refusal(datetime.now(UTC), reason)

    def as_json(self) -> dict[str, Any]:
        """What capabilities show about reloading (versions and fingerprints are in
        :meth:`KeyRing.describe`)."""
        return {"watching": self.watching, "reloads": self.reloads,
                "reloaded_at": None if self.reloaded_at is None
                else self.reloaded_at.isoformat().replace("+00:00", "Z"),
                "refused": None if self.refusal is None else {
                    "at": self.refusal.at.isoformat().replace("+00:00", "Z"),
                    "reason": self.refusal.reason}}
