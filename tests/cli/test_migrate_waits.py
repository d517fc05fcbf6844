"""``cortexctl migrate --wait-seconds``: a database that does not accept connections yet (a
new Cluster's Service before its primary answers) is waited for, so the migration Job's
pod does not exit in Error first (issue 38 item 9); past the wait, one clear line."""

from __future__ import annotations

import asyncio

from hack.support.served import CORTEXCTL

from tests.support.forwarder import Forwarder


async def _migrate(port: int, wait: str, dsn: str) -> asyncio.subprocess.Process:
    url = dsn.replace(dsn.split("@", 1)[1].split("/", 1)[0], f"127.0.0.1:{port}")
    return await asyncio.create_subprocess_exec(
        *CORTEXCTL, "migrate", "--database-url", url, "--wait-seconds", wait,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def test_migrate_waits_for_a_database_that_is_not_answering_yet(pg15_dsn: str) -> None:
    port = int(pg15_dsn.split("@", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
    service = await Forwarder(None).start()  # refuses every connection, as a starting primary
    try:
        process = await _migrate(service.port, "60", pg15_dsn)
        await asyncio.sleep(1.5)  # the database answers only later (what is under test)
        assert process.returncode is None, "migrate gave up instead of waiting"
        service.switch(port)
        out, err = await asyncio.wait_for(process.communicate(), timeout=120)
        assert process.returncode == 0, err.decode()
        assert "schema version 0 ->" in out.decode(), out.decode()
    finally:
        await service.close()


async def test_migrate_past_its_wait_is_one_clear_line(pg15_dsn: str) -> None:
    service = await Forwarder(None).start()
    try:
        process = await _migrate(service.port, "1", pg15_dsn)
        _, err = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode == 1
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and "did not accept a connection within 1 s" in lines[0], lines
    finally:
        await service.close()
