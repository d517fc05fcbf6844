"""The benches find the peer `make peers` built (hack/peers/ensure-ai-memory.sh) without
BENCH_PEER_AI_MEMORY, and only a build whose stamp names the pinned version (a half-done
or older build is not measured as 0.10.0). Milliseconds: files only."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench import peer


def built(cache: Path, stamp: str) -> Path:
    root = cache / "peers" / "ai-memory-0.10.0"
    (root / "bin").mkdir(parents=True)
    binary = root / "bin" / "ai-memory"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (root / ".version").write_text(stamp + "\n")
    return binary


def test_the_cached_peer_is_measured_when_none_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_PEER_AI_MEMORY", raising=False)
    monkeypatch.setenv("ATTESTED_CORTEX_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert peer.peer_binary() is None
    binary = built(tmp_path, "ai-memory-0.10.0")
    assert peer.peer_binary() == str(binary)
    named = tmp_path / "named"
    named.write_text("")
    monkeypatch.setenv("BENCH_PEER_AI_MEMORY", str(named))
    assert peer.peer_binary() == str(named)


def test_a_build_of_another_version_is_not_measured(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BENCH_PEER_AI_MEMORY", raising=False)
    monkeypatch.setenv("ATTESTED_CORTEX_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    built(tmp_path, "ai-memory-0.9.1")
    assert peer.peer_binary() is None
