"""``make run``'s port-forward (hack/forwarding.py) with real processes and real sockets.

Found on the real node (issue 20, item 16): ``kubectl delete pod`` of the server ended the
``kubectl port-forward`` and ``make run`` then stopped the whole node. Here a real HTTP
server process stands in for kubectl: killed as a pod deletion ends kubectl, it must come
back on the same port, and a forward that cannot start keeps being retried without ending
anything.
"""

from __future__ import annotations

import os
import signal
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from hack.forwarding import Forward
from hack.support.waiting import wait_until

pytestmark = pytest.mark.spawns  # real server processes stand in for kubectl


def _server(directory: Path) -> list[str]:
    return [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory",
            str(directory)]


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/hello.txt", timeout=2) as reply:
            return bool(reply.read() == b"hello")
    except OSError:
        return False


@pytest.fixture
def forward(tmp_path: Path) -> Iterator[Forward]:
    (tmp_path / "hello.txt").write_text("hello")
    running = Forward(lambda port: [*_server(tmp_path), str(port)],
                      log=tmp_path / "forward.log").start()
    yield running
    running.stop()


def test_a_forward_that_dies_comes_back_on_the_same_port(forward: Forward) -> None:
    assert forward.wait_listening(timeout=30)
    url = forward.url
    assert _answers(url)
    for round_ in range(1, 4):  # a pod deletion, then two rollouts
        pid = forward.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda old=pid: forward.pid() not in (None, old), what="a new forward process",
                   seconds=30)
        wait_until(lambda: _answers(url), what="the same URL answering again", seconds=30)
        assert forward.url == url and forward.restarts == round_


def test_a_forward_that_cannot_start_is_retried_and_stops_cleanly(tmp_path: Path) -> None:
    failing = Forward(lambda port: [sys.executable, "-c", "raise SystemExit(1)"],
                      log=tmp_path / "forward.log").start()
    try:
        wait_until(lambda: failing.restarts >= 2, what="two restarts", seconds=30)
        assert not failing.wait_listening(timeout=0.5)
    finally:
        failing.stop(timeout=10)
    assert "restarting on port" in (tmp_path / "forward.log").read_text()
    assert not failing.supervising() and failing.pid() is not None
