"""Helpers of the transcript API tests: a dialogue, raw rows, a cortex with transcripts on."""

from __future__ import annotations

from typing import Any

import psycopg

from tests.support.cortex import CortexClient

DIALOGUE = (
    "user: The deploy failed again on staging, can you look?\n"
    "agent: The migration Job timed out after 600 s waiting for a lock.\n"
    "user: Who holds it?\n"
    "agent: A long analytics query from the reporting role; I cancelled it.\n"
    "user: Great, rerun the deploy and tell me when it's green.\n"
    "agent: Green at 14:02. I'll add a statement_timeout to the reporting role.\n"
)


def row(dsn: str, sql: str, *params: Any) -> Any:
    """The first row of ``sql``."""
    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchone()


def count(dsn: str, table: str) -> int:
    """Rows in ``table``."""
    found = row(dsn, f"SELECT count(*) FROM {table}")
    return int(found[0])


async def store_transcript(client: CortexClient, namespace: str = "support/acme",
                           content: str = DIALOGUE, **more: Any) -> Any:
    """Store a transcript and return its JSON (asserts 201)."""
    reply = await client.call("POST", "/v1/transcripts",
                              {"namespace": namespace, "content": content, **more})
    assert reply.status == 201, reply.text
    return reply.body
