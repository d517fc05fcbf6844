"""Import a bundle into an empty cortex: every check before the one commit, or nothing.

Called by ``cortexctl import`` (and later by the operator's restore). Order of the checks,
each stopping the import with a :class:`~.errors.BundleError` that names what and where:

1. the manifest is readable, its format known, every chunk a plain name under ``chunks/``
   naming a regular file of the manifest's size (:mod:`.bundlefiles`: nothing outside the
   bundle, no link, device or FIFO is opened, no file read past its declared size); its
   signature verifies under the trusted keys (``trusted``) or, without them, under the
   bundle's own keys (which then proves integrity against accidents and against anyone
   without the signer's private key: ADR 0034);
2. the target's schema version is the bundle's and every table is empty;
3. chunk by chunk, in import order: present, the manifest's digest, its row count, then
   copied in; the chain's chunks walked event by event (:class:`~.checking.ChainWalk`) while
   they are copied;
4. the chain ends at the manifest's head (no dropped tail);
5. every signed link and every memory's signed current revision verifies under the keys;
6. the deep audit's sweep over the copied rows finds every row as its write record left it.

A bundle whose manifest lists ``omitted`` tables or columns (its source held what its
exporter did not carry, ADR 0085) is imported all the same, but the report is not
``complete`` and the target keeps the list (:func:`~attested_cortex.store.dumping.
mark_incomplete`): its deep audit, and so the restore verification, does not verify.

All of it runs in one transaction on one connection of the migrating role; a refusal rolls it
back, so nothing is ever visible from a bundle that does not verify. A chain chunk is walked
while PostgreSQL copies it (the copy is only visible at the commit, after every check).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attested_cortex.attest import spoke_index
from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.sweeping import SweepReport, sweep
from attested_cortex.bundles import bundlefiles, checking, manifests, signatures
from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import (
    COPY_SETTINGS,
    EVENTS,
    KEYS,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    SIGNATURE,
    TABLES,
    USAGE,
)
from attested_cortex.bundles.manifests import Manifest
from attested_cortex.store import dumping, scanning
from attested_cortex.store.migrating import current_version, migrate


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What was verified and imported."""

    rows: dict[str, int]
    chain_events: int
    chain_head: str | None
    signatures_checked: int
    signed_by: str | None
    keys: str
    #: True: the target already held exactly this bundle's chain and nothing was copied
    #: (``already_ok``: the operator's import Job run a second time).
    already: bool = False
    #: Seconds per phase (copy with the chain walk, signatures, sweep, commit, AGE mirror):
    #: where an import's time goes (bench/backup.py reports it).
    phases: dict[str, float] = field(default_factory=dict)
    #: What the source held that the bundle did not carry (table -> columns; ADR 0085):
    #: the target is marked incomplete and its deep audit does not verify.
    omitted: dict[str, list[str]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not self.omitted


async def import_bundle(dsn: str, root: Path, *, trusted: Keyring | None = None,
                        require_signed: bool = False, already_ok: bool = False,
                        signer: str | None = None) -> ImportReport:
    """Verify the bundle under ``root`` and import it into the empty database at ``dsn``.

    ``already_ok``: a target whose chain already ends at the bundle's head, with as many
    events, is this bundle imported before (the chain's last row is the marker: its hash
    covers every event before it); it is reported with ``already=True`` instead of being
    refused as not empty. The manifest and its signature are checked first all the same.
    ``signer``: the key id of the only acceptable manifest signer (ADR 0064); it implies
    ``require_signed``.
    """
    raw = bundlefiles.read(root, MANIFEST, limit=MAX_MANIFEST_BYTES)
    if raw is None:
        raise BundleError("missing_chunk", MANIFEST, "not a bundle directory")
    manifest = manifests.parse(raw)
    checking.check_layout(manifest)
    omitted = _omitted(manifest)
    bundlefiles.check_files(root, manifest.chunks)
    carried = checking.bundle_keyring(manifest, bundlefiles.read(
        root, KEYS, limit=bundlefiles.MAX_KEYS_BYTES))
    keyring = trusted if trusted is not None else carried
    signed_by = _signer(raw, bundlefiles.read(root, SIGNATURE,
                                              limit=bundlefiles.MAX_SIGNATURE_BYTES),
                        keyring, required=require_signed or signer is not None, pinned=signer)
    async with dumping.owner_connection(dsn) as conn, conn.transaction():
        if already_ok and await _holds(conn, manifest):
            return ImportReport(dict(manifest.rows), manifest.chain_events,
                                manifest.chain_head, 0, signed_by,
                                "trusted" if trusted is not None else "bundle", already=True,
                                omitted=omitted)
        await _check_target(conn, manifest)
        await dumping.configure(conn, COPY_SETTINGS)
        clock = _Clock()
        walk = await _copy(conn, root, manifest, keyring)
        clock.lap("copy_and_chain_walk")
        await _signatures(conn, keyring)
        clock.lap("link_and_memory_signatures")
        await _sweep(conn)
        await spoke_index.rebuild(conn)  # derived, not carried (migration 0037)
        clock.lap("deep_sweep")
        if omitted:
            await dumping.mark_incomplete(conn, omitted)
    clock.lap("commit")
    await migrate(dsn)  # rebuilds the AGE mirror of the links when the target has AGE
    clock.lap("graph_mirror")
    return ImportReport(dict(manifest.rows), manifest.chain_events, manifest.chain_head,
                        walk.signatures, signed_by, "trusted" if trusted is not None else "bundle",
                        phases=clock.phases, omitted=omitted)


async def with_completeness(conn: dumping.AnyConn, swept: dict[str, Any]) -> dict[str, Any]:
    """The deep sweep's report with what the bundle this database was restored from did not
    carry (``incomplete``, None when nothing): a partial restore never verifies (ADR 0085).
    Used by ``cortexctl audit verify --deep`` (the restore verification Job, either restore
    path) and ``GET /v1/audit/verify?deep=true``."""
    incomplete = await dumping.restore_omissions(conn)
    return {**swept, "incomplete": incomplete, "ok": bool(swept["ok"]) and incomplete is None}


def _omitted(manifest: Manifest) -> dict[str, list[str]]:
    """The manifest's ``omitted`` (absent in bundles of builds before ADR 0085)."""
    raw = manifest.raw.get("omitted") or {}
    if not isinstance(raw, dict) or not all(
            isinstance(v, list) and all(isinstance(c, str) for c in v) for v in raw.values()):
        raise BundleError("bad_manifest", MANIFEST, "omitted is not tables by their columns")
    return {str(k): list(v) for k, v in raw.items()}


class _Clock:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self.last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name], self.last = round(now - self.last, 2), now


def _signer(raw: bytes, signature: bytes | None, keyring: Keyring, *,
            required: bool, pinned: str | None) -> str | None:
    if signature is None:
        if required:
            wanted = "" if pinned is None else f" (key {pinned} must sign it)"
            raise BundleError("unsigned_bundle", SIGNATURE,
                              f"the bundle carries no signature{wanted}")
        return None
    return manifests.check_signature(raw, signature, keyring, signer=pinned)


async def _holds(conn: dumping.AnyConn, manifest: Manifest) -> bool:
    events, head = await dumping.chain_tip(conn)
    return events > 0 and (events, head) == (manifest.chain_events, manifest.chain_head)


async def _check_target(conn: dumping.AnyConn, manifest: Manifest) -> None:
    version = await current_version(conn)
    if version != manifest.schema_version:
        raise BundleError("schema_mismatch", "target", f"the target is at schema {version}, the "
                          f"bundle at {manifest.schema_version}: migrate the target to "
                          f"{manifest.schema_version} (cortexctl migrate --target)")
    full = await dumping.occupied(conn, [t.name for t in TABLES])
    if full:
        raise BundleError("target_not_empty", "target", f"{', '.join(full)} already hold rows: "
                          "import only into a freshly migrated, empty cortex")


async def _copy(conn: dumping.AnyConn, root: Path, manifest: Manifest,
                keyring: Keyring) -> checking.ChainWalk:
    with checking.ChainWalk(keyring) as walk:
        await dumping.chain_trigger(conn, enabled=False)
        for table in TABLES:
            if table is USAGE:
                await dumping.clear_usage(conn)
            for chunk in (c for c in manifest.chunks if c["table"] == table.name):
                data = bundlefiles.read(root, chunk["name"], limit=chunk["bytes"])
                checking.check_chunk(chunk, data)
                assert data is not None
                if table is EVENTS:
                    await _walk_and_copy(conn, walk, chunk["name"], data)
                else:
                    await dumping.copy_in(conn, table.name, table.columns, data)
            if table is EVENTS:
                walk.finish(manifest)
        await dumping.chain_trigger(conn, enabled=True)
    return walk


async def _walk_and_copy(conn: dumping.AnyConn, walk: checking.ChainWalk, name: str,
                         data: bytes) -> None:
    """A chunk of the chain walked (in a thread: hashes in Python, signatures in the bulk
    verifier's processes) while PostgreSQL copies it in (its own process): the two overlap.
    Both finish before either's failure is raised, the walk's first (the refusal that names
    the event); a refused chunk's rows are rolled back with the transaction, never
    committed."""
    walked, copied = await asyncio.gather(
        asyncio.to_thread(walk.walk, name, data),
        dumping.copy_in(conn, EVENTS.name, EVENTS.columns, data), return_exceptions=True)
    for outcome in (walked, copied):
        if isinstance(outcome, BaseException):
            raise outcome


async def _signatures(conn: dumping.AnyConn, keyring: Keyring) -> None:
    async for link in scanning.links(conn):
        if not signatures.link_verifies(link, keyring):
            raise BundleError("bad_link_signature", f"link {link.id}",
                              "its signature does not verify under the keys")
    async for memory, signature, signed_by, signed_at in dumping.signed_memories(conn):
        if memory.unreadable:  # sealed (ADR 0065): the import holds no key to open it; the
            continue           # chain's record covers its sealed value and the signature
        if not signatures.memory_verifies(memory, signature=signature, signed_by=signed_by,
                                          signed_at=signed_at, keyring=keyring):
            raise BundleError("bad_memory_signature", f"memory {memory.id}",
                              f"the signature of revision {memory.revision} does not verify")


def _from_before(report: SweepReport) -> bool:
    """Whether the only mismatches are record side rows without any record, every one of
    them: the chain of a build before ADR 0087's ``record`` kind, whose rows the target's
    first start adopts (as migration 0032 lists a cortex's own at its upgrade). A newer
    chain covers every record, so one uncovered row among covered ones is refused."""
    return 0 < report.mismatch_count == report.unrecorded_records == report.spoke.get(
        "record", 0)


async def _sweep(conn: dumping.AnyConn) -> None:
    report = await sweep(conn)
    if _from_before(report):
        await dumping.list_to_adopt(conn)
        return
    if not report.ok:
        first = report.mismatches[0]
        raise BundleError("rows_do_not_match_chain", f"{first.kind} {first.id}",
                          f"{first.problem} {', '.join(first.fields)} "
                          f"({report.mismatch_count} mismatches in all)")

