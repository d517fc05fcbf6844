"""``make run``: the whole system on this host, the way a platform engineer runs it; Ctrl-C
stops everything it started.

Builds what is missing (the real node's binaries and the images; seconds when current, and
each step says how long it took last time), starts the one-node cluster (hack/k8s/localkube/
realnode.py), installs charts/attested-cortex with Helm into a namespace enforcing the
restricted Pod Security Standard, applies examples/cortex/ (a MemoryCortex with a managed
database, two AgentIdentities and their ServiceAccounts, a HookChain, PermissionRules),
waits for the cortex to be Ready, port-forwards its Service to 127.0.0.1 (hack/forwarding.py:
restarted on the same port whenever a pod deletion or a rollout ends it, so the printed URL
outlives pod churn, and a lost forward never stops the node) and prints how to reach it:
the kubeconfig, ``kubectl get mcx``, the API URL and curl lines. The curl lines
read a token minted for the ``planner`` ServiceAccount from a file (mode 0600) in the run's
working directory; the token itself is never printed. Ctrl-C (or SIGTERM) stops the
port-forward and the node (which removes every process, mount and network piece it made)
and deletes the working directory. ``make serve`` (hack/serve.py) is the server alone.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hack.forwarding import Forward  # noqa: E402
from hack.k8s.localkube import binaries  # noqa: E402
from hack.k8s.localkube.realnode import RealNode  # noqa: E402
from hack.k8s.localkube.realnode_cli import IMAGES_SCRIPT, images_dir  # noqa: E402
from hack.k8s.localkube.waiting import ControlPlaneError  # noqa: E402

NAMESPACE = os.environ.get("CORTEX_RUN_NAMESPACE", "attested-cortex")
RELEASE = "attested-cortex"
CORTEX = "team-memory"  # examples/cortex/memorycortex.yaml
AGENT = "planner"       # examples/cortex/agentidentities.yaml (custody Cortex)
READY_TIMEOUT = "240s"
CACHE = Path(os.environ.get("ATTESTED_CORTEX_CACHE", Path.home() / ".cache" / "attested-cortex"))
TIMINGS = CACHE / "run-timings.json"


def _last_times() -> dict[str, float]:
    try:
        loaded = json.loads(TIMINGS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}


def build_step(name: str, command: list[str]) -> None:
    """Run one build step in the foreground, saying how long it took last time."""
    last = _last_times()
    hint = f" (last time {last[name]:.0f}s)" if name in last else " (first time: minutes)"
    print(f"make run: {name}{hint} ...", flush=True)
    began = time.monotonic()
    subprocess.run(command, check=True)
    last[name] = round(time.monotonic() - began, 1)
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(last))
    print(f"make run: {name} done in {last[name]:.0f}s", flush=True)


class Cluster:
    """kubectl and helm of the cached bin dir against the node, helm state in ``home``."""

    def __init__(self, kubeconfig: Path, bin_dir: Path, home: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig),
                    "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
                    "HELM_CACHE_HOME": str(home / "helm-cache"),
                    "HELM_CONFIG_HOME": str(home / "helm-config"),
                    "HELM_DATA_HOME": str(home / "helm-data")}

    def run(self, *command: str, input: str | None = None, timeout: float = 300) -> str:
        done = subprocess.run(list(command), input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip()}")
        return done.stdout


def install(cluster: Cluster) -> None:
    """The chart, then the examples, then a bounded wait for everything to be Ready."""
    namespace = cluster.run("kubectl", "create", "namespace", NAMESPACE, "--dry-run=client",
                            "-o", "yaml")
    cluster.run("kubectl", "apply", "-f", "-", input=namespace)
    cluster.run("kubectl", "label", "namespace", NAMESPACE, "--overwrite",
                "pod-security.kubernetes.io/enforce=restricted")
    print("make run: helm install charts/attested-cortex ...", flush=True)
    cluster.run("helm", "upgrade", "--install", RELEASE, str(ROOT / "charts" / "attested-cortex"),
                "--namespace", NAMESPACE, "--set", "image.pullPolicy=IfNotPresent",
                "--wait", "--timeout", "3m")
    print("make run: kubectl apply -f examples/cortex/ ...", flush=True)
    cluster.run("kubectl", "apply", "-n", NAMESPACE, "-f", str(ROOT / "examples" / "cortex"))
    for kind in ("memorycortex", "agentidentity", "hookchain", "permissionrule"):
        cluster.run("kubectl", "wait", "-n", NAMESPACE, "--for=condition=Ready", kind, "--all",
                    f"--timeout={READY_TIMEOUT}")


def port_forward(cluster: Cluster, log: Path) -> Forward:
    """``kubectl port-forward`` of the cortex Service to one port on 127.0.0.1, kept up."""
    forward = Forward(lambda port: ["kubectl", "port-forward", "-n", NAMESPACE, f"svc/{CORTEX}",
                                    f"{port}:8080", "--address", "127.0.0.1"],
                      log=log, env=cluster.env).start()
    if not forward.wait_listening(timeout=60):
        forward.stop()
        raise RuntimeError(f"port-forward failed: {log.read_text()[-2000:]}")
    return forward


def walkthrough(kubeconfig: Path, mcx: str, base: str, token_file: Path, logs: Path) -> str:
    """What to try, printed once everything answers."""
    auth = f'-H "Authorization: Bearer $(cat {token_file})" -H "Content-Type: application/json"'
    memory = '{"namespace":"team/deploys","content":"Deploys freeze on Fridays after 3pm"}'
    return textwrap.dedent(f"""
    attested-cortex is running on the one-node cluster (Ctrl-C stops everything)

      kubeconfig  {kubeconfig}
      namespace   {NAMESPACE}   (chart release {RELEASE}, examples/cortex/ applied)
      API         {base}   (kubectl port-forward svc/{CORTEX}, restarted when pods change;
                  auth: Kubernetes)
      token       {token_file}   (kubectl create token {AGENT} -n {NAMESPACE})
      node logs   {logs}

    $ kubectl get mcx -n {NAMESPACE}
    {mcx.rstrip().replace(chr(10), chr(10) + "    ")}

    Try:
      export KUBECONFIG={kubeconfig}
      # store a memory as the planner agent
      curl -s {auth} -d '{memory}' {base}/v1/memories
      # recall it
      curl -s {auth} -d '{{"query":"friday deploys","namespace":"team/deploys"}}' {base}/v1/recall
      # a PermissionRule denies secrets/** (403)
      curl -s {auth} -d '{{"namespace":"secrets/db","content":"x"}}' {base}/v1/memories
      # the audit chain
      curl -s {auth} {base}/v1/audit/verify
    """)


def main() -> int:
    """Build, start, install, print the walkthrough, wait for Ctrl-C, stop everything."""
    interrupted = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: interrupted.set())
    build_step("control-plane binaries (hack/k8s/ensure-binaries.sh)", [str(binaries.SCRIPT)])
    build_step("node binaries (hack/k8s/ensure-binaries.sh node)",
               [str(binaries.SCRIPT), "node"])
    build_step("images (hack/images/build.sh)", [str(IMAGES_SCRIPT)])
    workdir = Path(tempfile.mkdtemp(prefix="cortex-run-"))
    bin_dir = binaries.bin_dir()
    node = RealNode(bin_dir=bin_dir, images_dir=images_dir())
    forward: Forward | None = None
    try:
        print("make run: starting the one-node cluster ...", flush=True)
        node.start()
        print(f"make run: node started in {sum(node.timings.values()):.1f}s", flush=True)
        cluster = Cluster(node.kubeconfig, bin_dir, workdir)
        install(cluster)
        forward = port_forward(cluster, workdir / "port-forward.log")
        base = forward.url
        token_file = workdir / "planner.token"
        token = cluster.run("kubectl", "create", "token", AGENT, "-n", NAMESPACE,
                            "--duration", "24h").strip()
        token_file.touch(mode=0o600)
        token_file.write_text(token)
        mcx = cluster.run("kubectl", "get", "mcx", "-n", NAMESPACE)
        print(walkthrough(node.kubeconfig, mcx, base, token_file, node.layout.run / "logs"),
              flush=True)
        # Only Ctrl-C / SIGTERM end the run: a pod deletion or a rollout ends a kubectl
        # port-forward, and the Forward restarts it on the same port.
        while not interrupted.wait(0.5):
            pass  # woken by Ctrl-C / SIGTERM
    except (ControlPlaneError, RuntimeError, subprocess.SubprocessError, OSError) as error:
        print(f"make run: {error}", file=sys.stderr)
        return 1
    finally:
        print("\nstopping ...", flush=True)
        if forward is not None:
            forward.stop()
        node.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        print("stopped.", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
