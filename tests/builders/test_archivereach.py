"""How far the WAL archive reaches, from a primary's ``/pg/status`` answer (issue 38 item 4:
a restore's reach was invisible). Literals as CloudNativePG 1.27's instance manager
answers."""

from __future__ import annotations

from datetime import UTC, datetime

from attested_cortex.builders import archivereach, backupstates

PRIMARY = {"isPrimary": True, "currentLsn": "0/5000148", "currentWAL": "000000010000000000000005",
           "lastArchivedWAL": "000000010000000000000004",
           "lastArchivedWALTime": "2026-12-05T01:20:07.123456Z", "timeLineID": 1}


def test_the_archive_ends_with_the_last_archived_segment() -> None:
    assert archivereach.reach(PRIMARY) == {
        "lastArchivedWAL": "000000010000000000000004", "lastArchivedLSN": "0/5000000",
        "unarchivedBytes": 0x148, "latestRestorePoint": "2026-12-05T01:20:07.123456Z"}


def test_nothing_written_past_the_segment_is_a_complete_archive() -> None:
    switched = {**PRIMARY, "currentLsn": "0/5000000"}
    assert archivereach.reach(switched)["unarchivedBytes"] == 0


def test_positions_past_the_first_four_gigabytes_and_other_segment_sizes() -> None:
    assert archivereach.segment_end("0000000200000001000000FF") == 0x2_0000_0000
    assert archivereach.segment_end("000000010000000000000003", 64) == 4 * 64 * 1024 * 1024
    assert archivereach.segment_mb({"spec": {"bootstrap": {"initdb": {
        "walSegmentSize": 64}}}}) == 64
    assert archivereach.segment_mb({"spec": {}}) == 16
    assert archivereach.format_lsn(archivereach.parse_lsn("1A/B00F0") or 0) == "1A/B00F0"


def test_a_history_file_or_a_partial_segment_keeps_the_time_only() -> None:
    for wal in ("00000002.history", "000000010000000000000004.partial"):
        assert archivereach.reach({**PRIMARY, "lastArchivedWAL": wal}) == {
            "lastArchivedWAL": wal, "latestRestorePoint": "2026-12-05T01:20:07.123456Z"}


def test_postgres_text_times_become_rfc3339_utc() -> None:
    got = archivereach.reach({**PRIMARY, "lastArchivedWALTime": "2026-12-05 02:20:07.5+01"})
    assert got["latestRestorePoint"] == "2026-12-05T01:20:07.500000Z"


def test_no_answer_a_replica_or_nothing_archived_yet_tells_nothing() -> None:
    assert archivereach.reach(None) == {}
    assert archivereach.reach({**PRIMARY, "isPrimary": False}) == {}
    assert archivereach.reach({**PRIMARY, "lastArchivedWAL": "",
                               "lastArchivedWALTime": "-infinity"}) == {}


def test_status_backup_carries_the_reach() -> None:
    state = backupstates.observe(None, [], destination="s3://b", before=None,
                                 now=datetime(2026, 12, 5, tzinfo=UTC), archive_timeout_s=60,
                                 reach=archivereach.reach(PRIMARY))
    assert state.fields["lastArchivedLSN"] == "0/5000000"
    assert state.fields["archiveTimeoutSeconds"] == 60
