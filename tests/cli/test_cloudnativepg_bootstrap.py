"""What a CloudNativePG Cluster's bootstrap leaves is enough for ``cortexctl migrate`` and
``serve`` with Apache AGE: the application user owns the database but is no superuser, the
superuser ran the Cluster's ``postInitApplicationSQL`` (builders/clusters.py) and AGE is
preloaded (the AGE test server preloads it, as the Cluster's shared_preload_libraries does)."""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hack.support.pgservers import PgServer
from hack.support.served import CORTEXCTL, serve
from psycopg import sql

from attested_cortex.builders.clusters import BOOTSTRAP_SQL
from attested_cortex.builders.secrets import DB_USER


@pytest.fixture
def owner_dsn(age_server: PgServer) -> Iterator[str]:
    """A fresh database owned by the unprivileged application user, bootstrapped as the
    Cluster's initdb does."""
    name = f"cnpg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(age_server.dsn("postgres"), autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (DB_USER,)).fetchone()
        if not exists:
            admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(DB_USER)))
        admin.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(DB_USER)))
    with psycopg.connect(age_server.dsn(name), autocommit=True) as superuser:
        for statement in BOOTSTRAP_SQL:
            superuser.execute(statement.encode())
    yield f"postgresql://{DB_USER}@127.0.0.1:{age_server.port}/{name}"
    with psycopg.connect(age_server.dsn("postgres"), autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def post(base: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(f"{base}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json",
                                              "X-Agent-Id": "tester"})
    with urllib.request.urlopen(request, timeout=15) as reply:
        return json.loads(reply.read())


def test_the_application_user_migrates_and_serves_the_age_graph(owner_dsn: str,
                                                                 tmp_path: Path) -> None:
    with psycopg.connect(owner_dsn) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
        assert row == (False,)
    migrated = subprocess.run([*CORTEXCTL, "migrate", "--database-url", owner_dsn],
                              capture_output=True, text=True, timeout=120)
    assert migrated.returncode == 0, migrated.stderr
    assert "graph ready; vectors ready" in migrated.stdout
    with serve(owner_dsn, tmp_path, "--auth", "dev", "--graph-backend", "AGE",
               "--embedder", "none") as served:
        first = post(served.base, "/v1/memories", {"namespace": "t", "content": "alpha"})
        second = post(served.base, "/v1/memories", {"namespace": "t", "content": "beta"})
        post(served.base, "/v1/links", {"src_id": first["id"], "dst_id": second["id"],
                                        "relation": "related_to"})
        graph = post(served.base, "/v1/kg/query", {"start_id": first["id"], "depth": 2})
    assert {n["id"] for n in graph["nodes"]} == {first["id"], second["id"]}
    assert len(graph["edges"]) == 1
