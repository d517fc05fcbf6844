"""What a bundle holds: its tables in import order, their columns, and how chunks are named.

Pure data. A bundle is a directory (or a tar stream of one) with ``manifest.json``,
``manifest.sig.json`` when the exporting cortex has an audit signer, ``keys.json`` (the
public keys that verify the chain) and ``chunks/<table>-<nnnnnn>.copy``: PostgreSQL COPY
text rows (UTC, ISO dates, hex bytea), at most :data:`CHUNK_ROWS` rows or about
:data:`CHUNK_BYTES` bytes each. Tables are listed parents first, so foreign keys hold as
each is copied in; ``signed_events`` comes first of all because the import verifies it
before anything else. The generated column ``ns_depth`` is not carried: the target
recomputes it. A memory's ``search`` is (ADR 0056: a sealed row's keyed tokens cannot be
recomputed without the key; a plain row's the target's trigger recomputes), and a sealed row
travels sealed with its ``key_version``, as a transcript's frame does. Embeddings are not
carried (ADR 0033): the target's embedder recomputes them from the rows.

The same container carries a second content **kind** (ADR 0070): ``space``, one
spoke-memory space as its exporter's grants cover it (:mod:`.spaces`): no chain, no keys,
no signature and no schema binding, its chunks JSON lines (``chunks/<table>-<nnnnnn>.jsonl``)
of the :data:`SPACE_TABLES`, listed in the same manifest with the same SHA-256s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

#: The bundle format; an importer refuses a newer one.
FORMAT: Final = "attested-cortex-bundle"
FORMAT_VERSION: Final = 1
MANIFEST: Final = "manifest.json"
SIGNATURE: Final = "manifest.sig.json"
KEYS: Final = "keys.json"
CHUNKS_DIR: Final = "chunks"
CHUNK_ROWS: Final = 5000
CHUNK_BYTES: Final = 8 * 1024 * 1024
#: The largest manifest an importer reads (either kind): far past any a cortex writes, which
#: lists one chunk per 5,000 rows.
MAX_MANIFEST_BYTES: Final = 16 * 1024 * 1024
#: The session settings both ends of a COPY run under, so text rows read back exactly.
COPY_SETTINGS: Final = (
    ("TimeZone", "UTC"), ("DateStyle", "ISO, YMD"), ("IntervalStyle", "iso_8601"),
    ("bytea_output", "hex"), ("extra_float_digits", "3"),
)


@dataclass(frozen=True, slots=True)
class Table:
    """One exported table: its name, the columns carried, and the stable order of rows."""

    name: str
    columns: tuple[str, ...]
    order_by: str


EVENTS: Final = Table("signed_events", (
    "sequence", "agent_id", "event_type", "payload", "payload_hash", "signature",
    "key_fingerprint", "prev_hash", "hash", "created_at"), "sequence")
USAGE: Final = Table("agent_usage", ("agent", "memories", "transcripts", "spoke"), "agent")
#: Import order: the chain first, then parents before children, the counters last.
TABLES: Final[tuple[Table, ...]] = (
    EVENTS,
    Table("memories", ("id", "namespace", "title", "content", "tags", "metadata", "author",
                       "revision", "created_at", "updated_at", "deleted_at", "written_tier",
                       "written_scopes", "key_version", "sealed", "search", "written_allowed"),
          "id"),
    Table("memory_signatures", ("memory_id", "revision", "signature", "key_fingerprint",
                                "signed_by", "signed_at", "attest_level"),
          "memory_id, revision"),
    Table("links", ("id", "src_id", "dst_id", "relation", "valid_from", "valid_until",
                    "observed_by", "signature", "attest_level", "signed_by", "signed_at",
                    "created_at", "asserted_until", "written_tier", "written_scopes",
                    "written_allowed"), "id"),
    Table("transcripts", ("id", "namespace", "owner", "metadata", "frame", "raw_bytes",
                          "raw_chars", "stored_bytes", "created_at", "archived_at",
                          "pruned_at", "key_version", "written_tier", "written_scopes",
                          "written_allowed"), "id"),
    Table("memory_transcript_links", ("memory_id", "ordinal", "transcript_id", "span_start",
                                      "span_end"), "memory_id, ordinal"),
    # The spoke-memory family (ADR 0060, 0085): a record is a memories row (above) plus
    # its side row; parents first (spaces, subjects, receipts) so foreign keys hold.
    Table("memory_spaces", ("space_id", "provider", "revision", "frozen",
                            "authority_generation", "created_by", "schema_version",
                            "extensions", "created_at"), "space_id"),
    Table("memory_subjects", ("space_id", "subject_id", "kind", "state", "fenced_context_ids",
                              "revision", "schema_version", "extensions", "created_at"),
          "space_id, subject_id"),
    Table("memory_grants", ("grant_id", "space_id", "principal_id", "issued_by",
                            "capabilities", "subject_ids", "context_ids", "shared_access",
                            "expires_at", "revoked_at", "schema_version", "extensions",
                            "created_at", "derived_from"),
          # a derived grant references its parent (migration 0029), made before it
          "created_at, grant_id"),
    Table("memory_records", ("memory_id", "space_id", "subject_id", "kind", "context_id",
                             "source_context_id", "captured_by", "candidate_id", "structured",
                             "cognition", "schema_version", "extensions", "created_at",
                             "revision", "deleted_at"), "memory_id"),
    Table("memory_receipts", ("receipt_id", "space_id", "principal", "op", "idempotency_key",
                              "request_sha256", "status", "refs", "revision", "error_code",
                              "schema_version", "extensions", "created_at", "completed_at"),
          "receipt_id"),
    Table("memory_candidates", ("candidate_id", "space_id", "subject_id", "context_id",
                                "proposed", "classification", "state", "captured_by",
                                "consumed_by", "schema_version", "extensions", "created_at"),
          "candidate_id"),
    Table("memory_profiles", ("space_id", "subject_id", "kind", "text", "revision",
                              "updated_by", "schema_version", "extensions", "updated_at"),
          "space_id, subject_id, kind"),
    Table("memory_reflections", ("reflection_id", "space_id", "subject_id", "text", "basis",
                                 "state_digest", "created_by", "schema_version", "extensions",
                                 "created_at"), "reflection_id"),
    Table("memory_pending_work", ("receipt_id", "kind", "space_id", "principal", "payload",
                                  "created_at"), "receipt_id"),
    Table("memory_exports", ("export_id", "space_id", "chunk_count", "manifest_digest",
                             "authority_generation", "created_by", "created_at",
                             "grants_digest"), "export_id"),
    Table("memory_export_chunks", ("export_id", "ordinal", "data", "key_version", "digest"),
          "export_id, ordinal"),
    Table("memory_imports", ("import_id", "space_id", "state", "next_ordinal",
                             "manifest_digest", "created_by", "created_at"), "import_id"),
    Table("memory_import_chunks", ("import_id", "ordinal", "data", "key_version", "digest"),
          "import_id, ordinal"),
    USAGE,
)
BY_NAME: Final = {table.name: table for table in TABLES}
#: The tables a bundle does not carry, and why (ADR 0033, 0085). Every other table and
#: column of the database is carried; one this build knows neither way is listed in the
#: manifest's ``omitted`` and the bundle does not claim to be complete.
NOT_CARRIED: Final[dict[str, str]] = {
    "memory_embeddings": "derived: the target's embedder recomputes them from the rows",
    "idempotency_keys": "answers this server promised for a retry window",
    "pending_actions": "approvals are short-lived operational state of this server",
    "approval_signatures": "approvals are short-lived operational state of this server",
    "remembered_rules": "policy belongs to the target's configuration",
    "signed_event_macs": "MACs under the source's master key, which the import does not hold",
    "cortex_decisions": "the target decides for itself at its first start",
    "schema_migrations": "the target's own migration record",
    "master_key_checks": "fingerprints of the source's master key versions; the target "
                         "records those of its own key (ADR 0088)",
    "spoke_records_to_adopt": "the source's upgrade work list, emptied at its first start "
                              "(migration 0032)",
    "spoke_row_records": "derived: the import rebuilds it from the carried chain "
                         "(migration 0037)",
    "audit_tree_nodes": "derived: the target builds the Merkle tree from the carried chain",
    "audit_checkpoints": "the source's signed checkpoints stay with the source and its "
                         "witnesses; the target signs its own over the carried chain",
    "audit_cosignatures": "witnesses' cosignatures of the source's checkpoints",
    "federation_peers": "per-peer transport state (high-water marks) of the source's own "
                        "federation links; the target keeps its own (migration 0039)",
    "federation_objects": "the source's map of its peers' objects to its rows and the change "
                          "applied last; the target federates with its own peers (ADR 0121)",
    "federation_quarantine": "unverified changes held by the source for its administrator; "
                             "never part of the memory (migration 0039)",
    "federation_cursors": "how far the source's outbox was sent to each of its peers; the "
                          "target sends its own outbox to its own peers (migration 0042)",
    "outbox_events": "events already delivered (or due) to this server's subscribers; the "
                     "target's subscribers follow its own writes (ADR 0106)",
    "subscriptions": "delivery targets and their secrets belong to the target's "
                     "configuration (ADR 0106)",
    "subscription_states": "this server's delivery progress (ADR 0106)",
    "subscription_dead_letters": "this server's failed deliveries (ADR 0106)",
}

#: Columns of carried tables a bundle leaves out, and why: the target derives them.
NOT_CARRIED_COLUMNS: Final[dict[str, dict[str, str]]] = {
    "memories": {"token_format": "set by the search trigger from the row's vector as it is "
                                 "copied in (migration 0027)"},
    "signed_events": {"prev_mac": "the previous event's MAC, and MACs are not carried"},
}


def omissions(found: dict[str, list[str]]) -> dict[str, list[str]]:
    """What a bundle of a database with ``found`` (table -> its stored columns, generated
    ones left out) would not carry and no rule of this build says it may leave out: tables
    by their columns, columns of carried tables by themselves. Empty for a database of this
    build's schema."""
    omitted: dict[str, list[str]] = {}
    for table, columns in sorted(found.items()):
        if table in NOT_CARRIED:
            continue
        known = BY_NAME.get(table)
        carried = set(known.columns) | set(NOT_CARRIED_COLUMNS.get(table, {})) if known \
            else set()
        left = [c for c in columns if c not in carried]
        if left:
            omitted[table] = left
    return omitted


def chunk_name(table: str, index: int) -> str:
    """The path of a table's ``index``-th chunk inside the bundle."""
    return f"{CHUNKS_DIR}/{table}-{index:06d}.copy"


#: The content kind of a whole-cortex bundle (absent from its manifest: the first kind) and
#: of a spoke-memory space (``"kind": "space"`` in the manifest).
CORTEX_KIND: Final = "cortex"
SPACE_KIND: Final = "space"
#: A space bundle's tables and the fields of their JSON-lines rows (ADR 0070).
SPACE_TABLES: Final[dict[str, tuple[str, ...]]] = {
    "space_subjects": ("subject_id", "kind"),
    "space_records": ("subject_id", "kind", "context_id", "source_context_id", "content"),
    "space_profiles": ("subject_id", "kind", "text"),
}


def space_chunk_name(table: str, index: int) -> str:
    """The path of a space table's ``index``-th chunk inside the bundle."""
    return f"{CHUNKS_DIR}/{table}-{index:06d}.jsonl"
