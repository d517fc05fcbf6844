"""``status.backup`` and ``status.restore`` of a MemoryCortex: what its backups and its
restore came to. Pure data.

Shared by both backup paths (issue 24): the physical one (CloudNativePG's Barman object
store, read by ``builders/backupstates.py``) fills ``backup`` now; the logical one
(``spec.backup.logical``) reports in the same fields. ``restore`` is written by the
verification step (``builders/verification.py``) of any restore, physical or logical.
"""

from __future__ import annotations

from pydantic import Field, JsonValue

from attested_cortex.crd.common import CrdModel


def _time() -> dict[str, JsonValue]:
    return {"format": "date-time"}


class BackupFailure(CrdModel):
    """The last backup that failed, and why."""

    backup: str | None = Field(default=None, description="The failed Backup's name.",
                               max_length=253)
    time: str | None = Field(default=None, description="When it failed.", max_length=40,
                             json_schema_extra=_time())
    reason: str = Field(description="What the backup tool said.", max_length=1024)


class BackupStatus(CrdModel):
    """Where the cortex's backups stand."""

    last_successful_backup: str | None = Field(
        default=None, description="When the last backup that succeeded completed.",
        max_length=40, json_schema_extra=_time())
    last_backup_name: str | None = Field(
        default=None, description="The Backup that completed last.", max_length=253)
    first_recoverability_point: str | None = Field(
        default=None, description="The earliest instant a restore can go back to (the "
        "oldest base backup kept).", max_length=40, json_schema_extra=_time())
    completed: int | None = Field(
        default=None, ge=0, description="Backups completed and still listed.")
    last_failure: BackupFailure | None = Field(
        default=None, description="The last backup that failed, if any.")
    archive_timeout_seconds: int | None = Field(
        default=None, ge=0, description="How far behind the present a restore to the latest "
        "point may be while WAL archiving works: every write older than this many seconds "
        "is in the archive (spec backup.archiveTimeoutSeconds).")
    wal_archiving_since: str | None = Field(
        default=None, description="Since when WAL archiving has worked without a pause "
        "(CloudNativePG's ContinuousArchiving condition); absent while it is refused.",
        max_length=40, json_schema_extra=_time())
    last_archived_wal: str | None = Field(
        default=None, alias="lastArchivedWAL", description="The last WAL file the primary "
        "archived (pg_stat_archiver, read from CloudNativePG's instance manager; ADR 0110).",
        max_length=64)
    last_archived_lsn: str | None = Field(
        default=None, alias="lastArchivedLSN", description="The end of the last archived WAL "
        "segment: a restore to the latest point replays every write before this position.",
        max_length=20)
    unarchived_bytes: int | None = Field(
        default=None, ge=0, description="WAL the primary has written past lastArchivedLSN: "
        "0 means a restore to the latest point holds every write acknowledged so far.")
    latest_restore_point: str | None = Field(
        default=None, description="When the last WAL file was archived: while "
        "unarchivedBytes is above 0, writes acknowledged after this instant are not in the "
        "archive (refreshed every archiveTimeoutSeconds).", max_length=40,
        json_schema_extra=_time())


class RestoreStatus(CrdModel):
    """What the verification of a restored cortex checked (condition DataVerified)."""

    verified: bool | None = Field(
        default=None, description="Whether the restored chain and rows verified (absent "
        "while the verifier has not reached a verdict, and while a logical restore's import "
        "is done and its verification is not).")
    job: str | None = Field(default=None, description="The verification Job.",
                            max_length=253)
    source: str | None = Field(
        default=None, description="The bundle a logical restore imported (s3://bucket/"
        "path/bundle); recorded once the import Job succeeded, so it never runs again.",
        max_length=1200)
    import_job: str | None = Field(default=None, description="The import Job of a logical "
                                   "restore.", max_length=253)
    events: int | None = Field(default=None, ge=0, description="Audit events verified.")
    memories: int | None = Field(default=None, ge=0, description="Memory rows checked.")
    links: int | None = Field(default=None, ge=0, description="Link rows checked.")
    transcripts: int | None = Field(default=None, ge=0,
                                    description="Transcript rows checked.")
    signatures_checked: int | None = Field(default=None, ge=0,
                                           description="Event signatures verified.")
    macs_checked: int | None = Field(
        default=None, ge=0, description="Events whose HMAC-keyed chain MAC verified under the "
        "cortex's master key (absent: the keyed chain was not checked).")
    last_event: int | None = Field(
        default=None, ge=0, description="The sequence of the last event kept (a point-in-"
        "time restore keeps a prefix of the source chain).")
    head_hash: str | None = Field(default=None, description="The hash of that event.",
                                  max_length=128)
    reached_at: str | None = Field(
        default=None, description="When the last event kept was written: the point in "
        "time the restore reached (every write the source acknowledged before it is here; "
        "later ones are not).", max_length=40, json_schema_extra=_time())
    first_mismatch: str | None = Field(
        default=None, description="The first row or event that did not verify, by id.",
        max_length=1024)
    attempts: int | None = Field(
        default=None, ge=0, description="Verification Jobs that could not reach a verdict "
        "(database unreachable, pod evicted, deadline); each one is retried with backoff.")
    last_error: str | None = Field(
        default=None, description="Why the last verification Job could not reach a verdict.",
        max_length=1024)
    retry_at: str | None = Field(
        default=None, description="When the verification runs again.", max_length=40,
        json_schema_extra=_time())
