"""``make serve`` (hack/serve.py): the walkthrough works as printed, and Ctrl-C leaves nothing
behind (no server, no database, no working directory)."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def read_until(process: subprocess.Popen[str], marker: str, seconds: float = 120) -> str:
    """Read the process's output until ``marker`` appears (bounded)."""
    seen: list[str] = []
    deadline = time.monotonic() + seconds
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError(f"{marker!r} never printed:\n{''.join(seen)}")


@pytest.mark.age
def test_walkthrough_then_ctrl_c_cleans_up(age_server: object) -> None:
    process = subprocess.Popen([sys.executable, str(ROOT / "hack" / "serve.py")], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        text = read_until(process, "# what the server really has live")
        base = re.search(r"API\s+(http://127\.0\.0\.1:\d+)", text)
        workdir = re.search(r"logs\s+(\S+)", text)
        assert base and workdir
        store = next(line for line in text.splitlines() if "/v1/memories" in line)
        body = re.search(r"-d '(\{.*\})'", store)
        assert body
        request = urllib.request.Request(
            f"{base[1]}/v1/memories", data=body[1].encode(), method="POST",
            headers={"X-Agent-Id": "dev:alice", "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=15) as reply:
            assert json.load(reply)["namespace"] == "org/team"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stdout:
            process.stdout.close()
    assert not Path(workdir[1]).exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{base[1]}/healthz", timeout=2)
