"""A real C2SP witness no one here wrote cosigns the cortex's checkpoints (issue 40, ADR 0101):
torchwood v0.6.1's litewitness, built by hack/witness/ensure-witness.sh. It cosigns an honest
log through ``cortexctl audit push-checkpoint`` (its cosignature verifies with our
tlog-cosignature code), and refuses the same cortex rolled back to an old dump and a fork.
If the formats disagreed, ours would be wrong: the witness is the reference."""

from __future__ import annotations

import asyncio
import base64
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.support.pgservers import PgServer
from hack.support.waiting import wait_until

from attested_cortex.attest import notes
from attested_cortex.cli.main import main
from tests.server.test_audit_checkpoints import audited
from tests.server.test_audit_witness import cut_back, grow, pg_dump, restored
from tests.support.cortex import CortexClient, MakeCortex

ENSURE = Path(__file__).resolve().parents[2] / "hack" / "witness" / "ensure-witness.sh"
NAME = "witness.test/litewitness"


def _bin_dir() -> Path:
    return Path(subprocess.run([str(ENSURE), "--print-bin-dir"], check=True,
                               capture_output=True, text=True).stdout.strip())


@pytest.fixture
def litewitness(tmp_path: Path) -> Iterator[tuple[str, Path, notes.Verifier]]:
    """A running litewitness (its own ssh-agent and key): (URL, its database, its key)."""
    bin_dir = _bin_dir()
    if not (bin_dir / "litewitness").exists():
        pytest.skip(f"litewitness is not built: run {ENSURE.relative_to(ENSURE.parents[2])}")
    home = tmp_path / "lw"
    home.mkdir()
    key = home / "witness"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "", "-f", str(key)],
                   check=True)
    sock = home / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    procs = [agent]
    try:
        agent_env = {"SSH_AUTH_SOCK": str(sock)}

        def answering() -> bool:  # ssh-add -l: 1 with no keys, 2 while it cannot connect
            return subprocess.run(["ssh-add", "-l"], env=agent_env,
                                  capture_output=True).returncode != 2

        wait_until(answering, seconds=10, what="the ssh-agent answering")
        subprocess.run(["ssh-add", "-q", str(key)], check=True, env=agent_env,
                       capture_output=True)
        fingerprint = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", f"{key}.pub"],
                                     check=True, capture_output=True, text=True).stdout.split()[1]
        public = base64.b64decode(key.with_suffix(".pub").read_text().split()[1])[-32:]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log = (home / "litewitness.log").open("w")
        procs.append(subprocess.Popen(
            [str(bin_dir / "litewitness"), "-db", str(home / "w.db"), "-name", NAME,
             "-key", fingerprint, "-ssh-agent", str(sock), "-listen", f"127.0.0.1:{port}"],
            stdout=log, stderr=log))

        def listening() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(listening, seconds=30, what="litewitness listening")
        yield (f"http://127.0.0.1:{port}", home / "w.db",
               notes.Verifier(NAME, notes.COSIGNATURE_V1, public))
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=10)


def witnessctl(db: Path, *args: str) -> None:
    subprocess.run([str(_bin_dir() / "witnessctl"), args[0], "-db", str(db), *args[1:]],
                   check=True, capture_output=True, timeout=30)


async def enrol(cortex: CortexClient, db: Path) -> None:
    """Make the cortex's log known to the witness: its origin and its key."""
    view = (await cortex.call("GET", "/v1/audit/checkpoint",
                              headers={"Accept": "application/json"})).body
    await asyncio.to_thread(witnessctl, db, "add-log", "-origin", view["origin"])
    await asyncio.to_thread(witnessctl, db, "add-key", "-origin", view["origin"],
                            "-key", view["log_key"])


async def push(cortex: CortexClient, url: str, capsys: pytest.CaptureFixture[str]
               ) -> tuple[int, str]:
    code = await asyncio.to_thread(main, [
        "audit", "push-checkpoint", "--server", cortex.base, "--witness", url,
        "--agent-id", "dev:witness"])
    out = capsys.readouterr()
    return code, out.out + out.err


async def test_litewitness_cosigns_an_honest_log_and_refuses_rollback_and_fork(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, pg15_server: PgServer,
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        litewitness: tuple[str, Path, notes.Verifier]) -> None:
    url, db, witness = litewitness
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path)
    await grow(cortex, 6, "first")
    await enrol(cortex, db)

    code, said = await push(cortex, url, capsys)
    assert code == 0 and "cosigned: size 6" in said, said
    dump = tmp_path / "old.dump"
    await pg_dump(cortex.dsn, dump)
    for n in (3, 1, 9):  # sizes that are not powers of two, and some more
        await grow(cortex, n, f"honest {n}")
        code, said = await push(cortex, url, capsys)
        assert code == 0, said
        note = (await cortex.call("GET", "/v1/audit/checkpoint")).text
        line = next(x for x in said.splitlines() if x.startswith("\u2014 "))
        cosigned = note + line + "\n"
        assert notes.verify_cosignature(cosigned, witness) > 0  # its format is ours
    assert "cosigned: size 19" in said

    old = await audited(make_cortex, await restored(pg15_server, dump), tmp_path)
    code, said = await push(old, url, capsys)  # rolled back to 6
    assert code == 1 and "size 19" in said and "size 6" in said, said
    await grow(old, 20, "diverged")  # 26: past 19 on another history
    code, said = await push(old, url, capsys)
    assert code == 1 and "refused (422)" in said, said

    cut_back(cortex.dsn, 12)  # a fork: 19 events again, the last 7 different
    await grow(cortex, 7, "forked")
    code, said = await push(cortex, url, capsys)
    assert code == 1 and "refused (422)" in said, said


async def test_the_server_offers_its_checkpoints_and_serves_the_cosignatures(
        make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
        litewitness: tuple[str, Path, notes.Verifier]) -> None:
    url, db, witness = litewitness
    cortex = await audited(make_cortex, migrated_pg15_dsn, tmp_path,
                           audit={"witnesses": [{"name": "lite", "url": url}],
                                  "checkpoints": {"every_events": 10**6,
                                                  "every_seconds": 3600}})
    checkpointer = cortex.services.checkpointer
    assert checkpointer is not None
    await grow(cortex, 5, "first")
    await enrol(cortex, db)
    for n in (5, 7):  # from size 0, then from the size the witness's 409 names
        await grow(cortex, n, f"more {n}")
        row = await checkpointer.cut_now()
        assert row is not None
        await checkpointer.offer(row)
        served = await cortex.call("GET", "/v1/audit/checkpoint",
                                   headers={"Accept": "application/json"})
        assert served.body["cosignatures"] == 1 and served.body["size"] == row.size
        assert notes.verify_cosignature(served.body["note"], witness) > 0
        text = (await cortex.call("GET", "/v1/audit/checkpoint")).text
        assert text == served.body["note"]

    cut_back(cortex.dsn, 10)  # a fork at the cosigned size: refused, counted
    await grow(cortex, 7, "forked")
    row = await checkpointer.cut_now()
    assert row is not None
    await checkpointer.offer(row)
    metrics = await cortex.call("GET", "/metrics")
    assert 'cortex_audit_witness_refusals_total{witness="lite"} 1.0' in metrics.text
