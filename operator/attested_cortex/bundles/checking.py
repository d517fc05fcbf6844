"""Whether a bundle verifies: chunk digests and counts, and the chain walked from its first
event to its last with every signature of a known agent checked. Pure.

Driven chunk by chunk by :mod:`.importing`, which copies a chunk into the (uncommitted)
target only after it passed here, and commits only after :meth:`ChainWalk.finish`. Every
refusal is a :class:`~.errors.BundleError` naming the chunk, the event sequence or the
table. The per-event checks are the deep audit's own (:func:`~attested_cortex.attest.chain.
chain_fault`, :func:`~attested_cortex.attest.chain.signature_fault`): a bundle verifies
exactly when ``cortexctl audit verify`` would verify its chain.
"""

from __future__ import annotations

import json
from types import TracebackType

from attested_cortex.attest.bulkverify import BulkVerifier
from attested_cortex.attest.keyring import Keyring, build_keyring, parse_keyring_file
from attested_cortex.attest.verifying import check_batch
from attested_cortex.bundles import copytext
from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import BY_NAME, KEYS
from attested_cortex.bundles.manifests import Manifest, RawChunk, digest
from attested_cortex.errors import InvalidInputError
from attested_cortex.store.events import GENESIS_HASH, EventRow


def check_layout(manifest: Manifest) -> None:
    """Every chunk names a known table whose columns are the ones this build imports."""
    for table, columns in manifest.columns.items():
        known = BY_NAME.get(table)
        if known is None or tuple(columns) != known.columns:
            raise BundleError("bad_manifest", f"table {table}",
                              "columns differ from the ones this build imports")
    for chunk in manifest.chunks:
        if chunk["table"] not in manifest.columns:
            raise BundleError("bad_manifest", chunk["name"], "chunk of an unlisted table")


def check_chunk(chunk: RawChunk, data: bytes | None) -> None:
    """The chunk is present and its bytes are the ones the manifest digested."""
    if data is None:
        raise BundleError("missing_chunk", chunk["name"], "the manifest lists it; it is absent")
    if len(data) != chunk["bytes"] or digest(data) != chunk["sha256"]:
        raise BundleError("digest_mismatch", chunk["name"],
                          "its SHA-256 differs from the manifest's: the chunk was changed")
    if data.count(b"\n") != chunk["rows"]:
        raise BundleError("row_count_mismatch", chunk["name"], "row count differs")


def bundle_keyring(manifest: Manifest, data: bytes | None) -> Keyring:
    """The public keys the bundle carries (their digest is in the manifest)."""
    if data is None:
        raise BundleError("missing_chunk", KEYS, "the bundle's keys are absent")
    if digest(data) != manifest.keys_sha256:
        raise BundleError("digest_mismatch", KEYS, "the keys differ from the manifest's digest")
    try:
        files = json.loads(data)
        return build_keyring(r for raw in files for r in parse_keyring_file(raw))
    except (ValueError, TypeError, InvalidInputError) as exc:
        raise BundleError("bad_keys", KEYS, f"unreadable keys ({exc})") from exc


class ChainWalk:
    """The chain checked across chunks: sequences from 1 without gaps, each event linked to
    the previous one's hash and hashed as documented, signatures of known agents valid.

    A chunk is checked by :func:`~attested_cortex.attest.verifying.check_batch`, as
    :func:`~attested_cortex.attest.auditing.verify_chain` checks a batch: its signatures on
    the bulk verifier's processes while its hashes are walked; the first fault by position is
    the one reported. The processes live from the first big chunk to :meth:`close` (use the
    walk as a context manager)."""

    def __init__(self, keyring: Keyring, *, workers: int | None = None) -> None:
        self.keyring = keyring
        self.verifier = BulkVerifier(workers)
        self.expected = 1
        self.prev = GENESIS_HASH
        self.signatures = 0

    def walk(self, name: str, data: bytes) -> None:
        """Check one chunk of ``signed_events``; refuse at the first event that breaks."""
        events: list[EventRow] = []
        for fields in copytext.raw_rows(data):
            try:
                events.append(copytext.event(fields))
            except ValueError as exc:
                at = self.expected + len(events)
                raise BundleError("unreadable_event", f"{name} event {at}", str(exc)) from exc
        verdict = check_batch(events, expected_sequence=self.expected, expected_prev=self.prev,
                              keyring=self.keyring, verifier=self.verifier)
        if verdict.fault is not None:
            raise BundleError("chain_broken", f"{name} event {self.expected + verdict.good}",
                              verdict.fault)
        self.signatures += verdict.checked
        if events:
            self.expected, self.prev = events[-1].sequence + 1, events[-1].hash

    def close(self) -> None:
        """Stop the verifier's processes (a walk refused midway as well as a finished one)."""
        self.verifier.close()

    def __enter__(self) -> ChainWalk:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def finish(self, manifest: Manifest) -> None:
        """The chain ends where the manifest says: no event dropped from its tail."""
        events = self.expected - 1
        head = self.prev.hex() if events else None
        if events != manifest.chain_events or head != manifest.chain_head:
            raise BundleError("chain_truncated", f"signed_events event {events}",
                              f"the bundle's chain ends at event {events}, the manifest's at "
                              f"{manifest.chain_events} (head {manifest.chain_head})")
