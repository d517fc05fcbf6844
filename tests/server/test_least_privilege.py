"""The server runs as a least-privilege role: ``cortexctl migrate --app-role`` grants what the
server needs, everything works through HTTP, and the role still cannot rewrite the audit log.
"""

from pathlib import Path

import psycopg
import pytest

from attested_cortex.store.migrating import migrate
from tests.server.test_approvals_api import decide, hold
from tests.server.test_pipeline import approval_settings
from tests.support.cortex import MakeCortex
from tests.support.postgres import Database


async def test_everything_works_as_the_app_role(make_cortex: MakeCortex,
                                                any_database: Database,
                                                tmp_path: Path) -> None:
    await migrate(any_database.dsn, app_role="cortex_app")
    key = tmp_path / "master.key"  # every append sealed (the keyed chain) as the role too
    key.write_bytes(bytes(range(32)))
    app_dsn = any_database.server.app_dsn(any_database.name)
    client = await make_cortex(app_dsn, migrated=False, master_key={"file": key})
    a = await client.store("org", "least privilege memory")
    b = await client.store("org", "second memory")
    assert (await client.call("PATCH", f"/v1/memories/{a['id']}", {"title": "t"})).status == 200
    link = await client.call("POST", "/v1/links", {"src_id": a["id"], "dst_id": b["id"],
                                                   "relation": "related_to"})
    assert link.status == 201, link.text
    query = await client.call("POST", "/v1/kg/query", {"start_id": a["id"], "depth": 1})
    assert len(query.body["nodes"]) == 2
    assert (await client.call("POST", "/v1/recall", {"query": "privilege"})).body["results"]
    assert (await client.call("DELETE", f"/v1/memories/{b['id']}")).status == 200
    keyed = (await client.call("GET", "/v1/audit/verify")).body["keyed"]
    assert keyed["ok"] and keyed["macs_checked"] > 0
    with psycopg.connect(app_dsn) as conn:
        for statement in ("UPDATE signed_events SET agent_id = 'x'",
                          "DELETE FROM signed_events", "TRUNCATE signed_events",
                          "UPDATE signed_event_macs SET key_version = 2",
                          "DELETE FROM signed_event_macs", "TRUNCATE signed_event_macs",
                          "DROP TABLE memories", "DELETE FROM memories"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)
            conn.rollback()


async def test_unknown_app_role_is_a_clear_error(pg15_dsn: str) -> None:
    from attested_cortex.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="does not exist"):
        await migrate(pg15_dsn, app_role="nobody_here")


async def test_the_approval_sweeper_expires_and_purges_as_the_app_role(
    make_cortex: MakeCortex, any_database: Database, tmp_path: Path,
) -> None:
    await migrate(any_database.dsn, app_role="cortex_app")
    app_dsn = any_database.server.app_dsn(any_database.name)
    settings = approval_settings(tmp_path)
    settings["approval"]["retention_seconds"] = 60
    client = await make_cortex(app_dsn, migrated=False, **settings)
    rejected = await hold(client, {"namespace": "held/x", "content": "one"})
    overdue = await hold(client, {"namespace": "held/x", "content": "two"})
    assert (await decide(client, rejected, "reject")).status == 200
    with psycopg.connect(any_database.dsn) as conn:  # as the owner: time passes
        conn.execute("UPDATE pending_actions SET decided_at = now() - interval '2 minutes' "
                     "WHERE id = %s", (rejected,))
        conn.execute("UPDATE pending_actions SET expires_at = now() WHERE id = %s", (overdue,))
    expired = await client.services.approvals.sweep()
    assert [str(a.id) for a in expired] == [overdue]
    with psycopg.connect(any_database.dsn) as conn:
        left = [str(r[0]) for r in conn.execute("SELECT id FROM pending_actions")]
    assert left == [overdue]  # the rejected one purged by the app role
