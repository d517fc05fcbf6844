"""``kubectl cortex status`` prints how far the archive reaches (issue 38 item 4)."""

from __future__ import annotations

from attested_cortex.cli.kubectl_commands import reach_lines

BACKUP = {"lastBackupName": "n-db-1", "lastSuccessfulBackup": "2026-12-05T01:00:00Z",
          "completed": 1, "firstRecoverabilityPoint": "2026-12-05T01:00:00Z",
          "archiveTimeoutSeconds": 60, "walArchivingSince": "2026-12-05T00:59:00Z",
          "lastArchivedWAL": "000000010000000000000004", "lastArchivedLSN": "0/5000000",
          "latestRestorePoint": "2026-12-05T01:20:07.123456Z"}


def test_wal_not_yet_archived_names_the_point_past_which_writes_are_missing() -> None:
    text = "\n".join(reach_lines({"backup": {**BACKUP, "unarchivedBytes": 328}}))
    assert "archive ends at 0/5000000 (000000010000000000000004" in text
    assert ("328 bytes of WAL not yet archived; writes acknowledged after "
            "2026-12-05T01:20:07.123456Z are not in it") in text


def test_an_archive_up_to_date_holds_every_write() -> None:
    text = "\n".join(reach_lines({"backup": {**BACKUP, "unarchivedBytes": 0}}))
    assert "a restore to the latest point holds every write so far" in text
