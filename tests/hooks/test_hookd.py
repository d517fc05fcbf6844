"""``cortexctl hookd`` as a real process, and remote hooks reaching it over TCP and UDS."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.support.waiting import await_until

from tests.hooks.conftest import BEHAVE, PipelineFactory

pytestmark = pytest.mark.spawns  # starts cortexctl hookd as a subprocess

CORTEXCTL = [sys.executable, "-m", "attested_cortex"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def reachable(address: str) -> bool:
    family, target = (
        (socket.AF_UNIX, address.removeprefix("unix://"))
        if address.startswith("unix://")
        else (socket.AF_INET, ("127.0.0.1", int(address.rsplit(":", 1)[1])))
    )
    with socket.socket(family) as probe:
        return probe.connect_ex(target) == 0


@pytest.fixture
def hookd() -> Iterator[object]:
    started: list[subprocess.Popen[bytes]] = []

    def start(address: str, *program: str) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen([*CORTEXCTL, "hookd", "--listen", address, "--", *program])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)


def addresses(tmp_path: Path) -> list[str]:
    return [f"tcp://127.0.0.1:{free_port()}", f"unix://{tmp_path}/hook.sock"]


@pytest.mark.parametrize("transport", ["tcp", "unix"])
async def test_remote_hook_decides_through_hookd(
    make_pipeline: PipelineFactory, hookd: object, tmp_path: Path, transport: str
) -> None:
    address = addresses(tmp_path)[transport == "unix"]
    hookd(address, *BEHAVE)  # type: ignore[operator]
    await await_until(lambda: reachable(address), seconds=10)
    pipeline = await make_pipeline(
        {"name": "side", "events": ["pre_store", "post_recall"], "mode": "remote",
         "address": address, "timeout_ms": 1500}
    )
    deny = {"decision": "deny", "reason": "remote says no"}
    denied = await pipeline.fire("pre_store", {"behave": {"answer": deny}}, agent_id="a",
                                 namespace="n")
    many = await asyncio.gather(*(
        pipeline.fire("post_recall", {}, agent_id="a", namespace="n") for _ in range(50)
    ))
    slow = await pipeline.fire("pre_store", {"behave": {"sleep": 10}}, agent_id="a",
                               namespace="n")
    assert (denied.decision, denied.reason) == ("deny", "remote says no")
    assert all(r.records[0].failure is None for r in many)
    assert slow.records[0].failure == "timeout"


async def test_program_crash_behind_hookd_is_reported_and_recovers(
    make_pipeline: PipelineFactory, hookd: object, tmp_path: Path
) -> None:
    address = addresses(tmp_path)[1]
    hookd(address, *BEHAVE)  # type: ignore[operator]
    await await_until(lambda: reachable(address), seconds=10)
    pipeline = await make_pipeline(
        {"name": "side", "events": ["pre_store"], "mode": "remote", "address": address,
         "fail_mode": "closed"}
    )
    crashed = await pipeline.fire("pre_store", {"behave": {"crash": True}}, agent_id="a",
                                  namespace="n")
    assert crashed.decision == "deny" and crashed.records[0].failure == "crash"

    async def recovered() -> bool:
        result = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
        return result.decision == "allow"

    await await_until(recovered, what="a fire allowed again", seconds=10)  # a real fire each


async def test_remote_reconnects_when_hookd_comes_up_late(
    make_pipeline: PipelineFactory, hookd: object, tmp_path: Path
) -> None:
    address = addresses(tmp_path)[1]
    pipeline = await make_pipeline(
        {"name": "side", "events": ["pre_store"], "mode": "remote", "address": address}
    )
    early = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert early.records[0].failure == "unavailable"
    hookd(address, *BEHAVE)  # type: ignore[operator]
    await await_until(lambda: pipeline.describe()["by_event"]["pre_store"][0]["state"] == "up",
                      seconds=10)
    late = await pipeline.fire("pre_store", {}, agent_id="a", namespace="n")
    assert late.records[0].failure is None


def test_hookd_rejects_bad_arguments() -> None:
    no_command = subprocess.run([*CORTEXCTL, "hookd", "--listen", "tcp://127.0.0.1:1"],
                                capture_output=True, text=True)
    bad_address = subprocess.run([*CORTEXCTL, "hookd", "--listen", "http://x", "--", "true"],
                                 capture_output=True, text=True)
    assert no_command.returncode == 2 and "after --" in no_command.stderr
    assert bad_address.returncode == 2 and "tcp:// or unix://" in bad_address.stderr


async def test_an_infinite_deadline_is_an_invalid_request() -> None:
    from attested_cortex.hooks.sidecar import Sidecar

    sidecar = Sidecar(tuple(BEHAVE), listen=f"tcp://127.0.0.1:{free_port()}")
    line = (b'{"jsonrpc": "2.0", "id": 7, "method": "hook.fire", "params": {"hook": "h", '
            b'"event": "pre_store", "agent_id": "a", "namespace": null, "payload": {}, '
            b'"deadline_ms": 1e400}}')
    reply = await sidecar.handle(line)
    assert reply["error"]["code"] == -32600
