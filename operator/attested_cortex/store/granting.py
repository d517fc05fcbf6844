"""Least-privilege grants for the role the server connects as (``cortexctl migrate --app-role``).

The migrating role owns every table; the server's role gets only what the server does:
read the schema version, read and write memories and links, and *append* to
``signed_events`` (SELECT and INSERT: no UPDATE, DELETE or TRUNCATE, and never ownership,
since an owner could disable the append-only triggers). Where the AGE graph exists, the
role may use its schema to keep the mirror in step. Where the embeddings table exists, the
role reads and writes it (the background backfill replaces stale rows). Transcripts are
read, written, archived and pruned; a memory's citations are appended only. Per-agent
stored bytes (``agent_usage``) are read only: the database's own triggers keep them. Held
actions (``pending_actions``) are deleted by the approval sweeper after their retention.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from attested_cortex.errors import InvalidInputError

_TABLE_GRANTS: tuple[tuple[str, str], ...] = (
    ("SELECT", "schema_migrations"),
    ("SELECT, INSERT, UPDATE", "memories"),
    ("SELECT, INSERT, UPDATE", "links"),
    ("SELECT, INSERT", "signed_events"),
    # The keyed chain's MACs (migration 0014): appended only, like the events they seal.
    ("SELECT, INSERT", "signed_event_macs"),
    ("SELECT, INSERT, UPDATE, DELETE", "pending_actions"),
    ("SELECT, INSERT, DELETE", "approval_signatures"),
    ("SELECT, INSERT", "remembered_rules"),
    ("SELECT, INSERT", "memory_signatures"),
    # The sweeper archives (UPDATE) and prunes (UPDATE frame to NULL); rows are never deleted.
    ("SELECT, INSERT, UPDATE", "transcripts"),
    ("SELECT, INSERT", "memory_transcript_links"),
    # Read only: the triggers of migration 0009 (SECURITY DEFINER) keep the counters.
    ("SELECT", "agent_usage"),
    # A key is taken in its write's transaction, answered after it; never deleted (ADR 0030).
    ("SELECT, INSERT, UPDATE", "idempotency_keys"),
    # The spoke-memory family (migration 0016, ADR 0060): rows are updated, never deleted
    # (a revoke, a freeze, a tombstone and a receipt's completion are updates).
    ("SELECT, INSERT, UPDATE", "memory_spaces"),
    ("SELECT, INSERT, UPDATE", "memory_subjects"),
    ("SELECT, INSERT, UPDATE", "memory_grants"),
    ("SELECT, INSERT, UPDATE", "memory_records"),
    ("SELECT, INSERT, UPDATE", "memory_receipts"),
    ("SELECT, INSERT, UPDATE", "memory_candidates"),  # migration 0017
    ("SELECT, INSERT, UPDATE", "memory_profiles"),
    ("SELECT, INSERT", "memory_reflections"),  # migration 0018: never changed
    # exports expire with their chunks (issue 37 item 16: service/workers/transfer_expiry)
    ("SELECT, INSERT, DELETE", "memory_exports"),
    ("SELECT, INSERT, DELETE", "memory_export_chunks"),
    ("SELECT, INSERT, UPDATE", "memory_imports"),
    # a discard drops the staged chunks (nothing staged was ever visible)
    ("SELECT, INSERT, DELETE", "memory_import_chunks"),
    # migration 0024: a pending receipt's work row, claimed FOR UPDATE (which needs UPDATE)
    # and deleted when its receipt settles
    ("SELECT, INSERT, UPDATE, DELETE", "memory_pending_work"),
    # migration 0028: a decision is recorded once by the first server that asks, never changed
    ("SELECT, INSERT", "cortex_decisions"),
    # migration 0031: a key version's fingerprint is recorded once, never changed
    ("SELECT, INSERT", "master_key_checks"),
    # migration 0032: emptied once by the first start that covers the rows it lists
    ("SELECT, DELETE", "spoke_records_to_adopt"),
    # migration 0037: the latest op record of each spoke row, upserted with each op record
    ("SELECT, INSERT, UPDATE", "spoke_row_records"),
    # migration 0035: the audit tree's nodes and signed checkpoints, appended only
    ("SELECT, INSERT", "audit_tree_nodes"),
    ("SELECT, INSERT", "audit_checkpoints"),
    ("SELECT, INSERT", "audit_cosignatures"),  # migration 0036
    # migration 0038 (ADR 0106): the outbox is appended by writes and dropped by retention;
    # its sequence is read for the head; subscriptions are managed through the API
    ("SELECT, INSERT, DELETE", "outbox_events"),
    ("SELECT, USAGE", "outbox_events_seq_seq"),
    ("SELECT, INSERT, UPDATE, DELETE", "subscriptions"),
    ("SELECT, INSERT, UPDATE, DELETE", "subscription_states"),
    ("SELECT, INSERT, UPDATE, DELETE", "subscription_dead_letters"),
)


async def grant_app_role(
    conn: psycopg.AsyncConnection[Any], role: str, *, graph: str | None, vectors: bool = False,
) -> None:
    """Grant ``role`` what the server needs (idempotent: GRANT repeats harmlessly)."""
    cur = await conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (role,))
    row = await cur.fetchone()
    if row is None:
        raise InvalidInputError(f"--app-role {role!r} does not exist; create it first",
                                field="app_role")
    who = sql.Identifier(role)
    await conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(who))
    for privileges, table in _TABLE_GRANTS:
        await conn.execute(sql.SQL("GRANT " + privileges + " ON {} TO {}").format(
            sql.Identifier(table), who))
    if vectors:
        await conn.execute(sql.SQL(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON memory_embeddings TO {}").format(who))
    if graph is not None:
        schema = sql.Identifier(graph)
        await conn.execute(sql.SQL("GRANT USAGE ON SCHEMA ag_catalog, {} TO {}").format(
            schema, who))
        await conn.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA ag_catalog TO {}")
                           .format(who))
        await conn.execute(sql.SQL(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}").format(
                schema, who))
        await conn.execute(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {} TO {}").format(
            schema, who))
