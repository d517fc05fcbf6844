"""``cortexctl identity`` and ``cortexctl audit verify`` as a user runs them: subprocesses."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from attested_cortex.attest import cbor
from attested_cortex.attest.keyfiles import read_identity
from attested_cortex.builders import verification
from tests.attest.chainhelp import append_many, tamper
from tests.support.postgres import Database

pytestmark = pytest.mark.spawns  # cortexctl as subprocesses


def cortexctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attested_cortex", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


def _secret_of(directory: Path) -> str:
    lines = (directory / "private.pem").read_text().splitlines()
    return "".join(lines[1:-1])


def test_generate_writes_private_key_0600_and_prints_no_secret(tmp_path: Path) -> None:
    out = tmp_path / "planner"
    result = cortexctl(
        "identity", "generate", "--agent-id", "k8s:team-a/planner", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((out / "private.pem").stat().st_mode) == 0o600
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    key = read_identity(out)
    assert f"fingerprint: {key.public.fingerprint}" in result.stdout
    secret = _secret_of(out)
    seed_b64_fragment = secret[-20:]
    assert seed_b64_fragment not in result.stdout + result.stderr
    assert "PRIVATE" not in result.stdout + result.stderr


def test_show_and_export_pub_print_public_material_only(tmp_path: Path) -> None:
    out = tmp_path / "id"
    generated = cortexctl("identity", "generate", "--agent-id", "dev:alice", "--out", str(out))
    assert generated.returncode == 0
    shown = cortexctl("identity", "show", "--dir", str(out), "--json")
    facts = json.loads(shown.stdout)
    assert facts["agent_id"] == "dev:alice" and facts["private_key"] == "present"
    exported = cortexctl("identity", "export-pub", "--dir", str(out))
    document = json.loads(exported.stdout)
    assert document["keys"][0]["fingerprint"] == facts["fingerprint"]
    pem = cortexctl("identity", "export-pub", "--dir", str(out), "--format", "pem").stdout
    assert pem == (out / "public.pem").read_text()
    secret = _secret_of(out)[-20:]
    for result in (shown, exported):
        assert secret not in result.stdout + result.stderr


def test_generate_refuses_to_overwrite(tmp_path: Path) -> None:
    first = cortexctl("identity", "generate", "--agent-id", "a", "--out", str(tmp_path))
    assert first.returncode == 0
    before = (tmp_path / "private.pem").read_text()
    again = cortexctl("identity", "generate", "--agent-id", "a", "--out", str(tmp_path))
    assert again.returncode == 1 and "refusing to overwrite" in again.stderr
    assert (tmp_path / "private.pem").read_text() == before


def test_identity_errors_exit_non_zero_with_a_message(tmp_path: Path) -> None:
    missing = cortexctl("identity", "show", "--dir", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "missing" in missing.stderr
    empty = cortexctl("identity", "generate", "--agent-id", " ", "--out", str(tmp_path / "x"))
    assert empty.returncode == 1 and "must not be empty" in empty.stderr
    usage = cortexctl("identity", "generate", "--out", str(tmp_path / "y"))
    assert usage.returncode == 2 and "--agent-id" in usage.stderr


async def test_audit_verify_reports_ok_then_the_first_bad_sequence(
    chain_db: Database, tmp_path: Path
) -> None:
    keydir = tmp_path / "keys" / "planner"
    generated = cortexctl("identity", "generate", "--agent-id", "p", "--out", str(keydir))
    assert generated.returncode == 0
    await append_many(chain_db.app_dsn, read_identity(keydir), 5)
    summary = tmp_path / "summary.json"  # what the restore verification Job reports
    ok = cortexctl("audit", "verify", "--database-url", chain_db.app_dsn,
                   "--keys", str(tmp_path / "keys"), "--summary", str(summary))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("ok: 5 events") and "signatures checked 5" in ok.stdout
    written = json.loads(summary.read_text())
    assert (written["ok"], written["events"], written["last_event"],
            written["signatures_checked"]) == (True, 5, 5, 5)
    # when the last event was written: the point in time a restore verified this way reached
    assert datetime.fromisoformat(written["last_event_at"]) <= datetime.now(UTC)
    await tamper(chain_db.dsn, ("UPDATE signed_events SET payload = %s WHERE sequence = 3",
                                (cbor.encode({"n": "changed"}),)))
    bad = cortexctl("audit", "verify", "--database-url", chain_db.app_dsn, "--json",
                    "--summary", str(summary))
    assert bad.returncode == 1
    assert json.loads(summary.read_text())["first_mismatch"] == (
        "event 3: " + json.loads(bad.stdout)["reason"])
    # what the operator reads from the verification Job: a verdict on the data (ADR 0054)
    assert verification.data_failed(bad.returncode, json.loads(summary.read_text()))
    report = json.loads(bad.stdout)
    assert (report["ok"], report["first_bad_sequence"], report["events"]) == (False, 3, 2)
    text = cortexctl("audit", "verify", "--database-url", chain_db.app_dsn)
    assert text.returncode == 1 and "chain broken at sequence 3" in text.stdout


def test_audit_verify_cannot_run_exits_2(tmp_path: Path) -> None:
    unreachable = cortexctl("audit", "verify", "--database-url",
                            "postgresql://nobody@127.0.0.1:9/none", "--timeout", "1",
                            "--summary", str(tmp_path / "summary.json"))
    assert unreachable.returncode == 2 and "database" in unreachable.stderr
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written["ok"] is False and "database" in written["error"]
    # the operator retries this one: no verdict on the data (ADR 0054)
    assert not verification.data_failed(unreachable.returncode, written)
    no_keys = cortexctl("audit", "verify", "--database-url", "postgresql://x@127.0.0.1:9/x",
                        "--keys", str(tmp_path / "absent"))
    assert no_keys.returncode == 2 and "not a directory" in no_keys.stderr
