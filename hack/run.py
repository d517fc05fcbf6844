"""``make run``: the whole system on this host, the way a platform engineer runs it; Ctrl-C
stops everything it started.

Builds what is missing, and only what the chosen example needs (hack/runplan.py: the control
plane without kwok, the node, the images; CloudNativePG for ``CORTEX=ha``, MinIO for an example
with an object store; seconds when current, and each step says what it is for and how long it
took last time; ``--plan`` lists them and builds nothing), starts the one-node cluster
(hack/k8s/localkube/realnode.py), installs charts/attested-cortex with Helm into a namespace
enforcing the restricted Pod Security Standard, applies examples/cortex/ (a MemoryCortex with
a managed database, two AgentIdentities and their ServiceAccounts, a HookChain, PermissionRules),
waits for the cortex to be Ready, port-forwards its Service to 127.0.0.1 (hack/forwarding.py:
restarted on the same port whenever a pod deletion or a rollout ends it, so the printed URL
outlives pod churn, and a lost forward never stops the node) and prints how to reach it:
the kubeconfig, ``kubectl get mcx``, the API URL and curl lines. The curl lines
read a token minted for the ``planner`` ServiceAccount from a file (mode 0600) in the run's
working directory; the token itself is never printed. Ctrl-C (or SIGTERM) stops the
port-forward and the node (which removes every process, mount and network piece it made)
and deletes the working directory. ``make serve`` (hack/serve.py) is the server alone.

``make run CORTEX=ha`` (``--cortex ha``) starts the same system with the cortex's database on
CloudNativePG: the node's CloudNativePG (built by ``hack/k8s/ensure-binaries.sh cnpg`` and
hack/images/build.sh, once, on the first HA run) installed from its release manifest
(hack/cnpg.py), and examples/cortex-ha/memorycortex.yaml (3 instances, one synchronous replica)
in place of examples/cortex/memorycortex.yaml; the walkthrough adds how to watch a failover.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hack import cnpg, objectstore, runplan  # noqa: E402
from hack.forwarding import Forward  # noqa: E402
from hack.k8s.localkube import binaries  # noqa: E402
from hack.k8s.localkube.realnode import RealNode  # noqa: E402
from hack.k8s.localkube.realnode_cli import images_dir  # noqa: E402
from hack.k8s.localkube.waiting import ControlPlaneError  # noqa: E402

NAMESPACE = os.environ.get("CORTEX_RUN_NAMESPACE", "attested-cortex")
RELEASE = "attested-cortex"
CORTEX = "team-memory"  # examples/cortex/memorycortex.yaml
#: The object store credentials examples/cortex-ha/memorycortex.yaml's backup names.
BACKUP_CREDENTIALS = "team-memory-backups"
AGENT = "planner"       # examples/cortex/agentidentities.yaml (custody Cortex)
READY_TIMEOUT = "240s"
HA_READY_TIMEOUT = "600s"  # three instances one after the other, then the migration
CACHE = Path(os.environ.get("ATTESTED_CORTEX_CACHE", Path.home() / ".cache" / "attested-cortex"))
TIMINGS = CACHE / "run-timings.json"


#: A step that took less than this found everything built: "cached", not its cold cost.
CACHED_S = 5.0


#: The step names of an older make run (before hack/runplan.py's groups) -> the group's name.
RENAMED = {"control-plane binaries (hack/k8s/ensure-binaries.sh)": "control plane",
           "node binaries (hack/k8s/ensure-binaries.sh node)": "node",
           "images (hack/images/build.sh)": "images"}


def _timings() -> dict[str, dict[str, float]]:
    """Per step: ``cold_s`` (the longest run that built something) and ``last_s``. A file of
    an older make run (one float per step) is read as the last time, and as the cold one
    when it was not a cached run; its step names are read as the groups' (RENAMED)."""
    try:
        loaded = json.loads(TIMINGS.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[str, dict[str, float]] = {}
    for name, value in (loaded.items() if isinstance(loaded, dict) else ()):
        if isinstance(value, int | float):
            value = {"last_s": value, **({"cold_s": value} if value >= CACHED_S else {})}
        if isinstance(value, dict):
            out[RENAMED.get(str(name), str(name))] = {k: float(v) for k, v in value.items()
                              if k in ("cold_s", "last_s") and isinstance(v, int | float)}
    return out


def _hint(seen: dict[str, float], typical_s: int | None = None) -> str:
    """What the step costs, said before it runs (never run here: its cold time on the
    reference machine, when known)."""
    cold = seen.get("cold_s")
    if "last_s" not in seen:
        return (f"first time: about {typical_s // 60} min on 2 cores" if typical_s
                else "first time: minutes")
    if seen["last_s"] < CACHED_S:
        return (f"cached last time ({seen['last_s']:.1f}s)"
                + (f"; cold {cold:.0f}s" if cold is not None else
                   f"; cold about {typical_s // 60} min on 2 cores" if typical_s else ""))
    return f"last time {seen['last_s']:.0f}s"


def build_step(name: str, command: list[str], purpose: str = "",
               typical_s: int | None = None) -> None:
    """Run one build step in the foreground, saying what it is for and what it cost before:
    the cold time is kept across warm runs, so the first build's minutes stay visible."""
    timings = _timings()
    seen = timings.get(name, {})
    print(f"make run: {name}{f' - {purpose}' if purpose else ''} ({_hint(seen, typical_s)})"
          " ...",
          flush=True)
    began = time.monotonic()
    subprocess.run(command, check=True)
    took = round(time.monotonic() - began, 1)
    cached = took < CACHED_S
    seen = {**seen, "last_s": took}
    if not cached:
        seen["cold_s"] = max(took, seen.get("cold_s", 0.0))
    timings[name] = seen
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(timings))
    print(f"make run: {name} " + (f"cached ({took:.1f}s)" if cached else f"done in {took:.0f}s"),
          flush=True)


class Cluster:
    """kubectl and helm of the cached bin dir against the node, helm state in ``home``."""

    def __init__(self, kubeconfig: Path, bin_dir: Path, home: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(kubeconfig),
                    "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}",
                    "HELM_CACHE_HOME": str(home / "helm-cache"),
                    "HELM_CONFIG_HOME": str(home / "helm-config"),
                    "HELM_DATA_HOME": str(home / "helm-data")}

    def kubectl(self, *args: str, input: str | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """kubectl with ``args``; the caller reads the exit code."""
        return subprocess.run(["kubectl", *args], input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)

    def run(self, *command: str, input: str | None = None, timeout: float = 300) -> str:
        done = subprocess.run(list(command), input=input, capture_output=True, text=True,
                              env=self.env, timeout=timeout, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:3])} failed: {done.stderr.strip()}")
        return done.stdout


def install_cloudnativepg(cluster: Cluster, bin_dir: Path) -> None:
    """CloudNativePG from its release manifest (our images), usable once its webhooks answer."""
    print("make run: kubectl apply --server-side -f <CloudNativePG release> ...", flush=True)
    began = time.monotonic()
    installer = cnpg.Installer(kubectl=cluster.kubectl, manifest=cnpg.local_manifest(bin_dir))
    installer.apply()
    deadline = time.monotonic() + 300
    while not (installer.deployment_available() and installer.webhooks_answer()):
        if time.monotonic() > deadline:
            raise RuntimeError("CloudNativePG did not become available within 300 s")
        time.sleep(1)  # the poll interval of a bounded wait
    print(f"make run: CloudNativePG {cnpg.version()} ready in "
          f"{time.monotonic() - began:.0f}s", flush=True)


def install_objectstore(cluster: Cluster) -> None:
    """MinIO as a pod with its own volume (ADR 0037) and the Secret the HA example's backup
    names: the cortex archives its WAL and takes base backups there (barman-cloud creates
    the bucket on its first upload)."""
    if not (images_dir() / "minio.tar").is_file():
        print("make run: no MinIO image (hack/k8s/ensure-binaries.sh minio, hack/images/"
              "build.sh): the HA cortex's backups will report BackupHealthy=False", flush=True)
        return
    access, secret = "make-run", secrets.token_hex(20)
    installer = objectstore.Installer(kubectl=cluster.kubectl)
    installer.apply(objectstore.manifests(access_key=access, secret_key=secret))
    installer.apply([objectstore.credentials_secret(BACKUP_CREDENTIALS, NAMESPACE,
                                                    access_key=access, secret_key=secret)])
    deadline = time.monotonic() + 180
    while not installer.ready():
        if time.monotonic() > deadline:
            raise RuntimeError("the object store (MinIO) did not become ready within 180 s")
        time.sleep(1)  # the poll interval of a bounded wait
    print(f"make run: object store ready at {objectstore.endpoint()}", flush=True)


def examples(ha: bool) -> list[Path]:
    """What is applied: examples/cortex/, its MemoryCortex swapped for the HA one."""
    files = sorted((ROOT / "examples" / "cortex").glob("*.yaml"))
    if not ha:
        return files
    return [f for f in files if f.name != "memorycortex.yaml"] + [
        ROOT / "examples" / "cortex-ha" / "memorycortex.yaml"]


def build_plan(ha: bool) -> tuple[runplan.Group, ...]:
    """The build groups of the MemoryCortex this run applies (hack/runplan.py)."""
    manifest = next(path for path in examples(ha) if path.name == "memorycortex.yaml")
    return runplan.groups_for(yaml.safe_load(manifest.read_text()))


def print_plan(groups: tuple[runplan.Group, ...]) -> None:
    """``--plan``: each group, what it is for, its last time and what is still to build;
    builds nothing (ensure-binaries.sh --missing only reads stamps)."""
    timings = _timings()
    for group in groups:
        print(f"{group.name}: {group.purpose} "
              f"({_hint(timings.get(group.name, {}), group.cold_s)})")
        if group.components:
            missing = subprocess.run([str(ROOT / group.command[0]), "--missing",
                                      *group.components], capture_output=True, text=True,
                                     check=True).stdout.split()
            print(f"  to build: {' '.join(missing)}" if missing else "  built")
        else:
            print(f"  {group.command[0]} rebuilds what changed (its inputs' hashes)")


def create_namespace(cluster: Cluster) -> None:
    """The cortex's namespace, enforcing the restricted Pod Security Standard: first, since
    the HA variant's object store credentials Secret goes into it."""
    namespace = cluster.run("kubectl", "create", "namespace", NAMESPACE, "--dry-run=client",
                            "-o", "yaml")
    cluster.run("kubectl", "apply", "-f", "-", input=namespace)
    cluster.run("kubectl", "label", "namespace", NAMESPACE, "--overwrite",
                "pod-security.kubernetes.io/enforce=restricted")


def set_up(cluster: Cluster, bin_dir: Path, *, ha: bool) -> None:
    """Everything on a fresh node, in the order its objects need each other: the namespace,
    (HA) CloudNativePG and the object store with its Secret, then the chart and examples."""
    create_namespace(cluster)
    if ha:
        install_cloudnativepg(cluster, bin_dir)
        install_objectstore(cluster)
    install(cluster, ha=ha)


def install(cluster: Cluster, *, ha: bool = False) -> None:
    """The chart, then the examples, then a bounded wait for everything to be Ready (the
    namespace exists: :func:`create_namespace`)."""
    print("make run: helm install charts/attested-cortex ...", flush=True)
    cluster.run("helm", "upgrade", "--install", RELEASE, str(ROOT / "charts" / "attested-cortex"),
                "--namespace", NAMESPACE, "--set", "image.pullPolicy=IfNotPresent",
                "--wait", "--timeout", "3m")
    print(f"make run: kubectl apply -f examples/cortex/{' (cortex-ha)' if ha else ''} ...",
          flush=True)
    for path in examples(ha):
        cluster.run("kubectl", "apply", "-n", NAMESPACE, "-f", str(path))
    timeout = HA_READY_TIMEOUT if ha else READY_TIMEOUT
    for kind in ("memorycortex", "agentidentity", "hookchain", "permissionrule"):
        cluster.run("kubectl", "wait", "-n", NAMESPACE, "--for=condition=Ready", kind, "--all",
                    f"--timeout={timeout}", timeout=700)


def port_forward(cluster: Cluster, log: Path) -> Forward:
    """``kubectl port-forward`` of the cortex Service to one port on 127.0.0.1, kept up."""
    forward = Forward(lambda port: ["kubectl", "port-forward", "-n", NAMESPACE, f"svc/{CORTEX}",
                                    f"{port}:8080", "--address", "127.0.0.1"],
                      log=log, env=cluster.env).start()
    if not forward.wait_listening(timeout=60):
        forward.stop()
        raise RuntimeError(f"port-forward failed: {log.read_text()[-2000:]}")
    return forward


def failover_lines() -> str:
    """How to watch a failover of the HA cortex (appended to the walkthrough)."""
    primary = f"kubectl get mcx {CORTEX} -n {NAMESPACE} -o jsonpath='{{.status.primary}}'"
    return textwrap.dedent(f"""
    Watch a failover (CloudNativePG, 3 instances, 1 synchronous replica):
      kubectl get cluster {CORTEX}-db -n {NAMESPACE} -w &     # CNPG's view: phase, primary
      kubectl get mcx {CORTEX} -n {NAMESPACE} -w &            # ours: DatabaseReady, primary
      kubectl delete pod -n {NAMESPACE} "$({primary})"
      # writes meanwhile answer 503 with Retry-After (never a hang: ADR 0090) until the new
      # primary and its synchronous replica take them (docs/PERFORMANCE.md, HA: the measured
      # gap); a 503 is safe to send again with the same Idempotency-Key
      curl -s {{AUTH}} -H "Idempotency-Key: during-failover-1" \\
        -d '{{"namespace":"team/deploys","content":"written during a failover"}}' \\
        {{API}}/v1/memories
    """)


def path_line(bin_dir: Path) -> str:
    """The ``export PATH=...`` that puts the node's kubectl (the server's version: a host's
    own kubectl may be older) and the kubectl plugin ``kubectl-cortex`` (beside this Python,
    installed with the package) first."""
    plugin = Path(sys.executable).parent
    return f"export PATH={bin_dir}:{plugin}:$PATH"


def walkthrough(kubeconfig: Path, mcx: str, base: str, token_file: Path, logs: Path, *,
                bin_dir: Path) -> str:
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
      {path_line(bin_dir)}   # the node's kubectl and kubectl cortex
      kubectl cortex -n {NAMESPACE} status {CORTEX}
      # store a memory as the planner agent
      curl -s {auth} -d '{memory}' {base}/v1/memories
      # recall it
      curl -s {auth} -d '{{"query":"friday deploys","namespace":"team/deploys"}}' {base}/v1/recall
      # a PermissionRule denies secrets/** (403)
      curl -s {auth} -d '{{"namespace":"secrets/db","content":"x"}}' {base}/v1/memories
      # the audit chain
      curl -s {auth} {base}/v1/audit/verify
    """)


def main(argv: list[str] | None = None) -> int:
    """Build, start, install, print the walkthrough, wait for Ctrl-C, stop everything."""
    parser = argparse.ArgumentParser(prog="hack/run.py")
    parser.add_argument("--cortex", choices=("managed", "ha"),
                        default=os.environ.get("CORTEX") or "managed",
                        help="managed: one PostgreSQL pod; ha: CloudNativePG, 3 instances")
    parser.add_argument("--plan", action="store_true",
                        help="print what would be built for this cortex, build nothing")
    args = parser.parse_args(argv)
    ha = args.cortex == "ha"
    groups = build_plan(ha)
    if args.plan:
        print_plan(groups)
        return 0
    interrupted = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: interrupted.set())
    for group in groups:  # only what this cortex needs: no kwok, no previous release
        build_step(group.name, [str(ROOT / group.command[0]), *group.command[1:]],
                   group.purpose, group.cold_s)
    workdir = Path(tempfile.mkdtemp(prefix="cortex-run-"))
    bin_dir = binaries.bin_dir()
    node = RealNode(bin_dir=bin_dir, images_dir=images_dir())
    forward: Forward | None = None
    try:
        print("make run: starting the one-node cluster ...", flush=True)
        node.start()
        print(f"make run: node started in {sum(node.timings.values()):.1f}s", flush=True)
        cluster = Cluster(node.kubeconfig, bin_dir, workdir)
        set_up(cluster, bin_dir, ha=ha)
        forward = port_forward(cluster, workdir / "port-forward.log")
        base = forward.url
        token_file = workdir / "planner.token"
        token = cluster.run("kubectl", "create", "token", AGENT, "-n", NAMESPACE,
                            "--duration", "24h").strip()
        token_file.touch(mode=0o600)
        token_file.write_text(token)
        mcx = cluster.run("kubectl", "get", "mcx", "-n", NAMESPACE)
        auth = (f'-H "Authorization: Bearer $(cat {token_file})" '
                '-H "Content-Type: application/json"')
        print(walkthrough(node.kubeconfig, mcx, base, token_file, node.layout.run / "logs",
                          bin_dir=bin_dir)
              + (failover_lines().replace("{API}", base).replace("{AUTH}", auth) if ha
                 else ""), flush=True)
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
