"""``cortexctl mcp`` as a real subprocess driven by the SDK's stdio client: it relays the
tools of a real server (real PostgreSQL) with the caller's credentials, and a refused or
failed call stays a tool error."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from hack.support.served import CORTEXCTL, free_port, serve, stop
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.mcp.test_mcp_http import EXPECTED_TOOLS, error, ok
from tests.server.test_permissions_api import deny_rule
from tests.support.cortex import MakeCortex

# cortexctl mcp as a subprocess; one test waits out its 15 s start-up bound
pytestmark = pytest.mark.spawns


@asynccontextmanager
async def stdio(server: str, *extra: str, env: dict[str, str] | None = None,
                ) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "attested_cortex", "mcp", "--server", server, *extra],
        env={"PYTHONPATH": os.environ.get("PYTHONPATH", ""), **(env or {})})
    async with Client(params, mode="legacy") as client:
        yield client


async def test_stdio_relays_the_tools_as_the_dev_agent(
    make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False,
                               permissions={"mode": "enforce", "rules": [deny_rule()]})
    async with stdio(cortex.base, "--agent-id", "dev:stdio-agent") as client:
        assert {t.name for t in (await client.list_tools()).tools} == EXPECTED_TOOLS
        stored = ok(await client.call_tool("memory_store", {"namespace": "local",
                                                            "content": "relayed memory"}))
        assert stored["author"] == "dev:stdio-agent"
        found = ok(await client.call_tool("memory_recall", {"query": "relayed",
                                                            "budget_tokens": 50}))
        assert [h["id"] for h in found["results"]] == [stored["id"]]
        refused = error(await client.call_tool("memory_store", {"namespace": "secret/k",
                                                                "content": "k"}))
        bad = error(await client.call_tool("memory_get", {"id": "x"}))
        # past the cortex's message bound: its 413, not 503 upstream_unavailable (before)
        huge = error(await client.call_tool("memory_store", {
            "namespace": "local", "content": "z" * (3 * 1024 * 1024)}))
        assert (huge["status"], huge["error"]["code"]) == (413, "too_large")
        assert ok(await client.call_tool("memory_list", {}))["memories"][0]["id"] == stored["id"]
    http = await cortex.call("POST", "/v1/memories", {"namespace": "secret/k", "content": "k"})
    assert (refused["status"], refused["error"]) == (http.status, http.body["error"])
    assert (bad["status"], bad["error"]["code"]) == (400, "invalid_input")


async def test_stdio_sends_the_token_from_the_environment(
    make_cortex: MakeCortex, pg15_dsn: str, tmp_path: Path,
) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} k8s:team/writer\n")
    cortex = await make_cortex(pg15_dsn, auth=TokenAuth.from_file(tmp_path / "tokens"))
    async with stdio(f"{cortex.base}/mcp", env={"CORTEX_TOKEN": token}) as client:
        stored = ok(await client.call_tool("memory_store", {"namespace": "t", "content": "c"}))
    assert stored["author"] == "k8s:team/writer"
    (tmp_path / "token").write_text(token + "\n")
    async with stdio(cortex.base, "--token-file", str(tmp_path / "token")) as client:
        caps = ok(await client.call_tool("capabilities", {}))
    assert caps["quotas"]["you"]["agent_id"] == "k8s:team/writer"


async def test_a_cortex_gone_mid_session_is_a_tool_error_not_a_dead_session(
    migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    with serve(migrated_pg15_dsn, tmp_path) as served:
        async with stdio(served.base, "--agent-id", "dev:x") as client:
            assert ok(await client.call_tool("memory_list", {}))["memories"] == []
            stop(served.process)
            gone = error(await client.call_tool("memory_list", {}))
            assert (gone["status"], gone["error"]["code"]) == (503, "upstream_unavailable")
            assert (await client.list_tools()).tools  # the stdio session itself lives on


def test_the_relay_refuses_to_start_without_its_cortex_or_credentials() -> None:
    command = [*CORTEXCTL, "mcp", "--server", f"http://127.0.0.1:{free_port()}"]
    unreachable = subprocess.run([*command, "--agent-id", "dev:x"], input=b"",
                                 capture_output=True, timeout=60, check=False)
    assert unreachable.returncode == 1
    assert b"cannot serve http://127.0.0.1:" in unreachable.stderr
    anonymous = subprocess.run(command, input=b"", capture_output=True, timeout=60,
                               check=False, env={k: v for k, v in os.environ.items()
                                                 if not k.startswith("CORTEX_")})
    assert anonymous.returncode == 2 and b"--token-file" in anonymous.stderr


def test_a_cortex_that_never_answers_ends_the_start_up_in_bounded_time() -> None:
    """A port that accepts connections and never answers (a hung cortex, a wrong port): the
    relay exits 1 naming it after its start-up bound, not after the HTTP client's 300 s per
    answer (before: still waiting when this test's 60 s ran out)."""
    from attested_cortex.mcp.relay import STARTUP_TIMEOUT_S

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel accepts; nobody ever reads or answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        hung = subprocess.run([*CORTEXCTL, "mcp", "--server", f"http://127.0.0.1:{port}",
                               "--agent-id", "dev:x"], input=b"", capture_output=True,
                              timeout=60, check=False)
        waited = time.monotonic() - started
    assert hung.returncode == 1, hung.stderr
    assert f"cannot serve http://127.0.0.1:{port}/mcp".encode() in hung.stderr
    assert b"no answer within" in hung.stderr
    assert waited >= STARTUP_TIMEOUT_S
