"""Tampering with memory and link rows as the server's own database role (issue 13): the deep
audit names every changed, downgraded, unrecorded or vanished row by id, and a link's verify
no longer believes what the row says about its own attestation.

On 9800398 each change here left ``GET /v1/audit/verify`` answering ok and ``/verify``
answering verified.
"""

from __future__ import annotations

import asyncio
import subprocess
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import APP_ROLE, SUPERUSER
from hack.support.served import CORTEXCTL

from attested_cortex.attest.keyfiles import PRIVATE_FILE, write_identity
from attested_cortex.attest.keys import generate_key
from attested_cortex.store.migrating import migrate
from attested_cortex.types import AgentId
from tests.support.cortex import CortexClient, MakeCortex

CORTEX_AGENT = "dev:tester"
OTHER = "dev:agent-b"


@pytest.fixture
async def signed(make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path
                 ) -> CortexClient:
    keys = tmp_path / "keys"
    write_identity(keys / "tester", generate_key(AgentId(CORTEX_AGENT)))
    write_identity(keys / "agent-b", generate_key(AgentId(OTHER)))
    (keys / "agent-b" / PRIVATE_FILE).unlink()
    await migrate(migrated_pg15_dsn, app_role=APP_ROLE)  # grants what the server role holds
    return await make_cortex(migrated_pg15_dsn, migrated=False, keys_dir=keys,
                             graph_backend="CTE")


def as_app_role(client: CortexClient, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Run statements as the role the server uses in production (no superuser)."""
    dsn = client.dsn.replace(f"//{SUPERUSER}@", f"//{APP_ROLE}@")
    with psycopg.connect(dsn) as conn:
        for statement, params in statements:
            conn.execute(statement, params)


async def deep(client: CortexClient) -> dict[str, Any]:
    reply = await client.call("GET", "/v1/audit/verify?deep=true")
    assert reply.status == 200, reply.text
    return dict(reply.body)


def problems(report: dict[str, Any]) -> dict[str, tuple[str, list[str]]]:
    return {m["id"]: (m["problem"], m["fields"]) for m in report["deep"]["mismatches"]}


async def link(client: CortexClient, a: str, b: str, relation: str = "related_to") -> Any:
    reply = await client.call("POST", "/v1/links", {"src_id": a, "dst_id": b,
                                                    "relation": relation})
    assert reply.status == 201, reply.text
    return reply.body


async def test_untouched_rows_sweep_clean(signed: CortexClient) -> None:
    a = await signed.store("kb", "one")
    b = await signed.store("kb", "two")
    await signed.call("PATCH", f"/v1/memories/{a['id']}", {"content": "one, edited"})
    made = await link(signed, a["id"], b["id"])
    await signed.call("POST", "/v1/kg/invalidate", {"link_id": made["id"]})
    await signed.call("DELETE", f"/v1/memories/{b['id']}")
    report = await deep(signed)
    assert report["ok"] and report["deep"]["mismatch_count"] == 0
    assert (report["deep"]["memories"], report["deep"]["links"]) == (2, 1)


async def test_content_and_author_changed_by_the_role_are_named(signed: CortexClient) -> None:
    a, b = await signed.store("kb", "the truth"), await signed.store("kb", "untouched")
    as_app_role(signed, ("UPDATE memories SET content = 'a lie', author = 'dev:mallory' "
                         "WHERE id = %s", (a["id"],)))
    report = await deep(signed)
    assert report["ok"] is False and report["events"] > 0  # the chain itself is intact
    found = problems(report)
    assert found == {a["id"]: ("changed", ["author", "content_sha256"])}
    assert b["id"] not in found


async def test_signed_link_downgraded_to_unsigned_is_named(signed: CortexClient) -> None:
    a, b = await signed.store("kb", "a"), await signed.store("kb", "b")
    made = await link(signed, a["id"], b["id"])
    assert made["attest_level"] == "self_signed"
    as_app_role(signed, ("UPDATE links SET attest_level = 'unsigned', signature = NULL, "
                         "signed_by = NULL, signed_at = NULL WHERE id = %s", (made["id"],)))
    found = problems(await deep(signed))
    assert found[made["id"]][0] == "downgraded"
    assert {"attest_level", "signature_sha256"} <= set(found[made["id"]][1])


async def test_self_signed_relabelled_peer_attested_does_not_verify(
    signed: CortexClient,
) -> None:
    a, b = await signed.store("kb", "a"), await signed.store("kb", "b")
    made = await link(signed, a["id"], b["id"])
    as_app_role(signed, ("UPDATE links SET attest_level = 'peer_attested', signed_by = %s "
                         "WHERE id = %s", (OTHER, made["id"])))
    check = (await signed.call("GET", f"/v1/links/{made['id']}/verify")).body
    assert check["signature_verified"] is False
    assert check["attest_level"] == "self_signed"  # what the key that verified supports
    assert check["stored_attest_level"] == "peer_attested"
    assert check["reason"] == "signed_by_is_not_observed_by"
    as_app_role(signed, ("UPDATE links SET signed_by = observed_by WHERE id = %s",
                         (made["id"],)))
    check = (await signed.call("GET", f"/v1/links/{made['id']}/verify")).body
    assert (check["signature_verified"], check["reason"]) == (False, "stored_level_differs")
    assert problems(await deep(signed))[made["id"]][0] == "changed"


async def test_reopened_link_and_rows_written_behind_the_server_are_named(
    signed: CortexClient,
) -> None:
    a, b = await signed.store("kb", "a"), await signed.store("kb", "b")
    gone = await signed.store("kb", "removed later")
    made = await link(signed, a["id"], b["id"])
    await signed.call("POST", "/v1/kg/invalidate", {"link_id": made["id"]})
    smuggled = str(uuid.uuid4())
    as_app_role(
        signed,
        ("UPDATE links SET valid_until = NULL WHERE id = %s", (made["id"],)),
        ("INSERT INTO memories (id, namespace, content, author) "
         "VALUES (%s, 'kb', 'smuggled', 'dev:tester')", (smuggled,)),
    )
    with psycopg.connect(signed.dsn) as conn:  # only an owner can remove a row
        conn.execute("DELETE FROM memories WHERE id = %s", (gone["id"],))
    found = problems(await deep(signed))
    assert found[made["id"]] == ("changed", ["valid_until"])
    assert found[smuggled] == ("missing_event", [])
    assert found[gone["id"]] == ("missing_row", [])


async def test_cli_deep_names_mismatches_and_exits_1(signed: CortexClient) -> None:
    with psycopg.connect(signed.dsn) as conn:
        memory_id = str(uuid.uuid4())
        conn.execute("INSERT INTO memories (id, namespace, content, author) "
                     "VALUES (%s, 'kb', 'x', 'dev:tester')", (memory_id,))
    result = await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", signed.dsn, "--deep"],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result
    assert f"memory {memory_id}: missing_event" in result.stdout
    plain = await asyncio.to_thread(
        subprocess.run, [*CORTEXCTL, "audit", "verify", "--database-url", signed.dsn],
        capture_output=True, text=True, timeout=60)
    assert plain.returncode == 0  # the chain alone cannot see a row written behind it
