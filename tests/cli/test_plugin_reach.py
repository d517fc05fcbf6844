"""``kubectl cortex status`` says how far a restore reaches (issue 38): the last base backup,
since when WAL is archived and how far behind the present the latest restorable point may be,
and, on a restored cortex, the point it reached."""

from __future__ import annotations

from attested_cortex.cli.kubectl_commands import reach_lines


def test_status_shows_the_archives_reach_and_a_restores_point() -> None:
    status = {"backup": {"lastBackupName": "team-db-1", "lastSuccessfulBackup":
                         "2026-12-04T03:01:00Z", "completed": 2,
                         "firstRecoverabilityPoint": "2026-12-03T03:01:00Z",
                         "archiveTimeoutSeconds": 60,
                         "walArchivingSince": "2026-12-04T02:00:00Z"},
              "restore": {"verified": True, "lastEvent": 573,
                          "reachedAt": "2026-12-04T21:58:10+00:00"}}
    text = "\n".join(reach_lines(status))
    assert "last team-db-1 at 2026-12-04T03:01:00Z (2 kept)" in text
    assert "restorable from 2026-12-03T03:01:00Z" in text
    assert ("WAL archived since 2026-12-04T02:00:00Z: a restore to the latest point reaches "
            "every write older than 60 s") in text
    assert "restored:  up to 2026-12-04T21:58:10+00:00 (event 573), verified: True" in text
    stopped = reach_lines({"backup": {"archiveTimeoutSeconds": 60}})
    assert "WAL archiving NOT confirmed" in "\n".join(stopped)
    assert reach_lines({}) == []
