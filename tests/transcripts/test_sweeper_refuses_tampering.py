"""The retention sweeper never launders tampering (issue 20, item 12).

A transcript changed in SQL (owner, metadata, created_at) is named by the deep audit; the
sweeper used to build its ``transcript.archived`` record from the altered row, and after the
next sweep the audit found nothing. Now the sweeper checks each row against its previous
record first, refuses to archive or prune one that no longer matches, reports it, and the
deep audit keeps naming it; untouched transcripts are swept as before.
"""

from __future__ import annotations

from datetime import timedelta

from tests.support.cortex import CortexClient
from tests.transcripts.common import row, store_transcript
from tests.transcripts.test_audit import as_app_role, client, deep, problems, records, sweep_at

__all__ = ["client"]  # the fixture, imported for this module's tests

FIELDS = ["created_at", "metadata_sha256", "owner"]


async def test_a_transcript_changed_behind_the_server_is_not_swept_and_stays_named(
    client: CortexClient,
) -> None:
    tampered = await store_transcript(client, "scratch/a", metadata={"channel": "chat"})
    clean = await store_transcript(client, "scratch/b")
    (created,) = row(client.dsn, "SELECT created_at FROM transcripts WHERE id = %s",
                     clean["id"])
    as_app_role(client, "UPDATE transcripts SET owner = 'dev:mallory', metadata = "
                "'{\"channel\": \"email\"}', created_at = created_at - interval '1 hour' "
                "WHERE id = %s", tampered["id"])
    named = {tampered["id"]: ("transcript", "changed", FIELDS)}
    assert problems(await deep(client)) == named

    archived = await sweep_at(client, 2, created)
    assert archived.archived == 1 and [str(i) for i in archived.refused] == [tampered["id"]]
    pruned = await sweep_at(client, 10, created)
    assert pruned.pruned == 1
    assert problems(await deep(client)) == named  # still named after both sweeps
    assert [kind for kind, *_ in records(client.dsn, tampered["id"])] == ["transcript.stored"]
    assert [kind for kind, *_ in records(client.dsn, clean["id"])] == [
        "transcript.stored", "transcript.archived", "transcript.pruned"]
    (archived_at, frame) = row(client.dsn, "SELECT archived_at, frame IS NOT NULL "
                               "FROM transcripts WHERE id = %s", tampered["id"])
    assert archived_at is None and frame is True

    caps = await client.call("GET", "/v1/capabilities")
    refused = caps.body["transcripts"]["sweeper"]["last"]["refused"]
    assert refused == {"count": 1, "ids": [tampered["id"]]}
    later = await sweep_at(client, 12, created + timedelta(days=1))
    assert (later.archived, later.pruned, len(later.refused)) == (0, 0, 1)
