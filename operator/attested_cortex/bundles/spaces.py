"""One spoke-memory space as a bundle (ADR 0070): the logical bundle's container with the
``space`` content kind. Pure. Called by the service's ``spoke_transfer``
(``memory.exports.create`` and the final ``memory.imports.stage``).

A space bundle is the files of :mod:`.formats`'s layout: ``chunks/<table>-<nnnnnn>.jsonl``
of the :data:`~.formats.SPACE_TABLES` (one canonical JSON object per line: sorted keys, no
spaces, UTF-8; at most ``CHUNK_ROWS`` rows or about ``CHUNK_BYTES`` each, like the cortex
bundle's chunks), then ``manifest.json`` rendered by :func:`.manifests.render` with
``"kind": "space"``: every chunk's name, table, rows, bytes and SHA-256, the rows by table,
the fields of each table. No chain, keys, signature or schema version: a space export holds
what one principal's grants cover, for another provider (or a later cortex), so it binds to
no chain and no schema.

On the wire the bundle travels as its tar stream (:mod:`.tarring`, the form ``GET
/v1/export`` streams a cortex bundle in), cut into ``MemoryExportChunk`` units of at most
``chunk_bytes``, each with its own SHA-256; the export's **manifest digest** is the SHA-256 of
``manifest.json``'s bytes. On the final staged chunk the importer reassembles the stream and
:func:`read_space` verifies it the way the cortex bundle's import does: the manifest's digest,
then each listed chunk present with its bytes, SHA-256 and row count
(:func:`.checking.check_chunk`), no file the manifest does not list, then every row under
the wire's bounds and request models (ADR 0084: nothing is read before it is known to fit).
"""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Sequence
from typing import Any, Final

from pydantic import Field, ValidationError

from attested_cortex.bundles import manifests, tarring
from attested_cortex.bundles.checking import check_chunk
from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.formats import (
    CHUNK_BYTES,
    CHUNK_ROWS,
    MANIFEST,
    MAX_MANIFEST_BYTES,
    SPACE_KIND,
    SPACE_TABLES,
    space_chunk_name,
)
from attested_cortex.bundles.manifests import RawChunk
from attested_cortex.errors import InvalidInputError
from attested_cortex.jsonbounds import decode_json, validation_error
from attested_cortex.spoke.models import Content, Wire, context_field, ident_field, kind_field

#: The document's lists, by table.
LISTS: Final = {"space_subjects": "subjects", "space_records": "records",
                "space_profiles": "profiles"}


class SpaceSubjectRow(Wire):
    """A ``space_subjects`` row: what ``memory.subjects.ensure`` takes."""

    subject_id: str = ident_field()
    kind: str | None = kind_field()


class SpaceRecordRow(Wire):
    """A ``space_records`` row: what ``memory.records.create`` takes (placement as its
    context, ``None`` for shared)."""

    subject_id: str = ident_field()
    kind: str | None = kind_field()
    context_id: str | None = context_field()
    source_context_id: str | None = Field(default=None, min_length=1, max_length=256)
    content: Content


class SpaceProfileRow(Wire):
    """A ``space_profiles`` row: what ``memory.profile.update`` takes."""

    subject_id: str = ident_field()
    kind: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_-]+$")
    text: str = Field(max_length=200_000)


#: Each table's row model (ADR 0084: a staged row passes what the wire's request would).
ROW_MODELS: Final[dict[str, type[Wire]]] = {
    "space_subjects": SpaceSubjectRow, "space_records": SpaceRecordRow,
    "space_profiles": SpaceProfileRow}


def canonical(value: Any) -> bytes:
    """Canonical JSON bytes (sorted keys, no spaces, UTF-8)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode()


def space_files(document: dict[str, list[dict[str, Any]]]) -> list[tuple[str, bytes]]:
    """The bundle's files of a space document (``subjects``, ``records``, ``profiles``),
    the manifest last."""
    files: list[tuple[str, bytes]] = []
    chunks: list[RawChunk] = []
    for table, fields in SPACE_TABLES.items():
        batch: list[bytes] = []
        size = 0
        for row in document[LISTS[table]]:
            batch.append(canonical({f: row[f] for f in fields}) + b"\n")
            size += len(batch[-1])
            if len(batch) >= CHUNK_ROWS or size >= CHUNK_BYTES:
                _flush(table, batch, files, chunks)
                batch, size = [], 0
        if batch:
            _flush(table, batch, files, chunks)
    rows = {t: sum(c["rows"] for c in chunks if c["table"] == t) for t in SPACE_TABLES}
    files.append((MANIFEST, manifests.render({
        "kind": SPACE_KIND, "chunks": chunks, "rows": rows,
        "columns": {t: list(f) for t, f in SPACE_TABLES.items()}})))
    return files


def _flush(table: str, batch: list[bytes], files: list[tuple[str, bytes]],
           chunks: list[RawChunk]) -> None:
    name = space_chunk_name(table, sum(1 for c in chunks if c["table"] == table))
    data = b"".join(batch)
    files.append((name, data))
    chunks.append({"name": name, "table": table, "rows": len(batch), "bytes": len(data),
                   "sha256": manifests.digest(data)})


def wire_chunks(files: Sequence[tuple[str, bytes]],
                chunk_bytes: int) -> tuple[list[tuple[bytes, str]], str]:
    """The bundle's tar stream cut into ``(data, sha256)`` units of at most ``chunk_bytes``,
    and the manifest digest (the SHA-256 of ``manifest.json``)."""
    stream = b"".join(tarring.member(name, data) for name, data in files) + tarring.END
    parts = [stream[i:i + chunk_bytes] for i in range(0, len(stream), chunk_bytes)]
    manifest = dict(files)[MANIFEST]
    return [(part, manifests.digest(part)) for part in parts], manifests.digest(manifest)


def read_space(stream: bytes, manifest_digest: str) -> dict[str, list[dict[str, Any]]]:
    """The document of a reassembled space bundle, verified; BundleError otherwise
    (``manifest_mismatch`` when its manifest is not the one ``manifest_digest`` names).

    Nothing is read before it is known to fit: the tar headers are walked first (regular
    members only, none sparse, each inside the stream), every chunk's declared size is
    compared with the manifest's before its bytes are touched, and every row is decoded
    under the wire's JSON bounds and validated by its row model (ADR 0084)."""
    members = _members(stream)
    manifest_member = members.pop(MANIFEST, None)
    if manifest_member is None:
        raise BundleError("missing_chunk", MANIFEST, "the bundle has no manifest")
    if manifest_member.size > MAX_MANIFEST_BYTES:
        raise BundleError("bad_manifest", MANIFEST, f"{manifest_member.size} bytes, more "
                          f"than a manifest may have ({MAX_MANIFEST_BYTES})")
    manifest = _data(stream, manifest_member)
    if manifests.digest(manifest) != manifest_digest:
        raise BundleError("manifest_mismatch", MANIFEST,
                          "the staged bundle's manifest is not the one manifest_digest names")
    parsed = manifests.parse_space(manifest)
    if parsed.columns != {t: list(f) for t, f in SPACE_TABLES.items()}:
        raise BundleError("bad_manifest", MANIFEST, "its tables or fields are not a space's")
    document: dict[str, list[dict[str, Any]]] = {name: [] for name in LISTS.values()}
    for chunk in parsed.chunks:
        if chunk["table"] not in SPACE_TABLES:
            raise BundleError("bad_manifest", chunk["name"], "chunk of an unlisted table")
        member = members.pop(chunk["name"], None)
        if member is not None and member.size != chunk["bytes"]:
            raise BundleError("size_mismatch", chunk["name"], f"the archive declares "
                              f"{member.size} bytes, the manifest {chunk['bytes']}")
        data = None if member is None else _data(stream, member)
        check_chunk(chunk, data)
        assert data is not None
        document[LISTS[chunk["table"]]] += [_row(chunk, line) for line in data.splitlines()]
    if members:
        raise BundleError("unlisted_file", sorted(members)[0], "the manifest does not list it")
    for table, name in LISTS.items():
        if len(document[name]) != parsed.rows.get(table):
            raise BundleError("row_count_mismatch", table, "rows differ from the manifest's")
    _subjects_listed(document)
    return document


def _row(chunk: RawChunk, line: bytes) -> dict[str, Any]:
    """One row: JSON within the wire's bounds (depth, numbers, Unicode), then its table's
    row model, the same field constraints the wire's requests carry."""
    try:
        value = decode_json(line)
    except InvalidInputError as exc:
        raise BundleError("bad_row", chunk["name"], f"a row is not JSON the wire accepts "
                          f"({exc.message})") from exc
    if not isinstance(value, dict) or set(value) != set(SPACE_TABLES[chunk["table"]]):
        raise BundleError("bad_row", chunk["name"], "a row's fields are not its table's")
    try:
        row = ROW_MODELS[chunk["table"]].model_validate(value)
    except ValidationError as exc:
        problem = validation_error(exc)
        raise BundleError("bad_row", chunk["name"], f"a row is not valid: "
                          f"{problem.message}") from exc
    dumped: dict[str, Any] = row.model_dump(mode="json")
    if isinstance(row, SpaceRecordRow):
        dumped["content"] = row.content.wire()
    return dumped


def _subjects_listed(document: dict[str, list[dict[str, Any]]]) -> None:
    """Every record and profile is about a subject the bundle lists."""
    listed = {s["subject_id"] for s in document["subjects"]}
    for name in ("records", "profiles"):
        for row in document[name]:
            if row["subject_id"] not in listed:
                raise BundleError("bad_row", f"space_{name}", f"a row names subject "
                                  f"{row['subject_id']!r}, which the bundle does not list")


def _members(stream: bytes) -> dict[str, tarfile.TarInfo]:
    """The tar stream's members by name, from their headers alone (no data read): each a
    plain regular file (no sparse map, link, device or directory) whose data lies inside
    the stream; BundleError for anything else or a name twice. Names never touch a
    filesystem."""
    found: dict[str, tarfile.TarInfo] = {}
    try:
        with tarfile.open(fileobj=io.BytesIO(stream), mode="r:") as tar:
            for member in tar:
                if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) \
                        or member.sparse is not None or member.name in found:
                    raise BundleError("bad_archive", member.name, "not a plain regular "
                                      "file (sparse, a link or another type), or a name twice")
                if member.offset_data + member.size > len(stream):
                    raise BundleError("bad_archive", member.name, f"declares {member.size} "
                                      "bytes, more than the staged stream holds")
                found[member.name] = member
    except tarfile.TarError as exc:
        raise BundleError("bad_archive", "stream", f"not a tar stream ({exc})") from exc
    return found


def _data(stream: bytes, member: tarfile.TarInfo) -> bytes:
    return stream[member.offset_data:member.offset_data + member.size]
