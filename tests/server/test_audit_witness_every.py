"""``cortexctl audit witness --every`` as the operator runs it (issue 40, ADR 0102): a real
subprocess against a real server, its report read over HTTP as the operator reads it. It
cosigns as the log grows; killed with SIGKILL and started again on the same state it
resumes (the size never goes back, no refusal, the log key not pinned again); a truncated
log is refused and reported while the witness keeps running, holding the log to what it
cosigned. About 5 s: the server and a witness polling every 0.2 s."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hack.support.waiting import await_until

from tests.server.test_audit_checkpoints import audited
from tests.server.test_audit_witness import cut_back, grow
from tests.support.cortex import CortexClient, MakeCortex


class Witness:
    """One ``--every`` witness process and its report."""

    def __init__(self, cortex: CortexClient, state: Path) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "attested_cortex", "audit", "witness", "--server",
             cortex.base, "--state", str(state), "--agent-id", "dev:witness", "--name",
             "witness.test/w1", "--every", "0.2", "--report-listen", "127.0.0.1:0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.process.stdout is not None
        first = self.process.stdout.readline()
        assert first.startswith("serving the report on port "), first
        self.port = int(first.split()[-1])

    def report(self) -> dict[str, Any]:
        url = f"http://127.0.0.1:{self.port}/report"
        with urllib.request.urlopen(url, timeout=5) as answer:
            found: dict[str, Any] = json.loads(answer.read())
        return found

    def output(self) -> str:
        self.process.kill()
        out, _ = self.process.communicate(timeout=30)
        return out


@pytest.fixture
def witnesses() -> Iterator[list[Witness]]:
    started: list[Witness] = []
    yield started
    for one in started:
        if one.process.poll() is None:
            one.process.kill()
            one.process.communicate(timeout=30)


async def _reports(witness: Witness, size: int, *, refused: bool = False) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        found = witness.report()
        done = found.get("cosignedSize") == size and (
            str(found.get("lastError", "")).startswith("refused") == refused)
        return found if done else None
    return await await_until(lambda: seen(), seconds=30, interval_s=0.05,
                             what=f"the witness's report of size {size}")


async def test_the_witness_resumes_after_sigkill_and_keeps_refusing_a_truncation(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        witnesses: list[Witness]) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    state = tmp_path / "witness"
    await grow(cortex, 5, "first")
    witnesses.append(first := Witness(cortex, state))
    await _reports(first, 5)
    await grow(cortex, 20, "second")
    before = await _reports(first, 25)
    assert "lastError" not in before and before["cosignedAt"].endswith("Z")
    said = first.output()  # SIGKILL, mid-round or between rounds
    assert "pinned the log key" in said

    await grow(cortex, 5, "while down")
    witnesses.append(second := Witness(cortex, state))
    after = await _reports(second, 30)
    assert "lastError" not in after
    cut_back(cortex.dsn, 15)  # the newest 15 events and the head, with the database role
    await grow(cortex, 0, "")
    refused = await _reports(second, 30, refused=True)
    assert "refused (truncated)" in refused["lastError"]
    assert "size 30" in refused["lastError"] and "size 15" in refused["lastError"]
    assert second.process.poll() is None  # it keeps running, and refusing
    said = second.output()
    assert "pinned the log key" not in said  # resumed from its state, not trusting anew
    assert "cosigned: size 30" in said and "cosigned: size 5" not in said


async def test_a_state_an_older_witness_wrote_is_reported_from_its_checkpoint(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        witnesses: list[Witness]) -> None:
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    state = tmp_path / "witness"
    await grow(cortex, 4, "first")
    witnesses.append(first := Witness(cortex, state))
    held = await _reports(first, 4)
    first.output()
    (state / "cosigned.json").unlink()  # a state from before --every
    witnesses.append(second := Witness(cortex, state))
    assert await _reports(second, 4) == held  # its size, root and time, unchanged
