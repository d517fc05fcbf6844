"""``cortexctl operator`` as a real process against the real API server: it becomes ready,
serves probes and metrics, and stops cleanly on SIGTERM."""

import os
import signal
import subprocess
import urllib.request

import pytest
from hack.support.kube import Kube
from hack.support.served import CORTEXCTL, free_port, wait_until_up

pytestmark = pytest.mark.kube


def test_operator_starts_ready_and_stops_cleanly(kube: Kube, kube_namespace: str) -> None:
    health, metrics = free_port(), free_port()
    process = subprocess.Popen(
        [*CORTEXCTL, "operator", "--namespace", kube_namespace,
         "--health-listen", f"127.0.0.1:{health}", "--metrics-listen", f"127.0.0.1:{metrics}"],
        env={**os.environ, "KUBECONFIG": str(kube.kubeconfig)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        wait_until_up(f"http://127.0.0.1:{health}/readyz", process, seconds=60)
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=15) as reply:
            assert b"cortex_operator_ready 1.0" in reply.read()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        output = process.stdout.read().decode() if process.stdout else ""
        if process.stdout:
            process.stdout.close()
    assert code == 0, output[-3000:]
    assert "operator ready" in output


def test_operator_needs_a_scope() -> None:
    env = {k: v for k, v in os.environ.items() if k != "POD_NAMESPACE"}
    result = subprocess.run([*CORTEXCTL, "operator"], capture_output=True, text=True,
                            env=env, timeout=60)
    assert result.returncode == 2 and "--namespace" in result.stderr
