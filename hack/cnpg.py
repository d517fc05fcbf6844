"""CloudNativePG on our cluster: its release manifest pointed at our images, and its install.

Callers: tests/support/cnpg.py (the e2e fixture), hack/run.py (``make run CORTEX=ha``), bench/ha.py.

``hack/k8s/ensure-binaries.sh cnpg`` builds the manager from the Go module and keeps the module's
own release manifest (``releases/cnpg-<version>.yaml``: CRDs, RBAC, webhooks, the operator
Deployment) beside it; ``hack/images/build.sh`` wraps the manager into
``docker.io/attested-cortex/cloudnative-pg:<version>``. The manifest names the upstream image
with ``imagePullPolicy: Always``, which cannot be pulled here, and no operand image, so CNPG
would default every Cluster to its own PostgreSQL image. :func:`rewrite` (pure) changes exactly
that: the operator image and the image its pods' bootstrap init container copies the instance
manager from, the pull policy (the image is imported into the node, never pulled), and
``POSTGRES_IMAGE_NAME``, CNPG's default operand, set to our postgres-age image (its tag's first
component is the major version CNPG reads), and ``STANDBY_TCP_USER_TIMEOUT`` (ADR 0111).
Everything else is applied as released.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ROOT / "hack" / "k8s" / "versions.env"
NAMESPACE = "cnpg-system"
DEPLOYMENT = "cnpg-controller-manager"
POSTGRES_IMAGE = "docker.io/attested-cortex/postgres-age:17"
# What the user types to install it by hand (the command our CloudNativePGMissing condition and
# the docs name); the file is the rewritten manifest in the cache.
LOCAL_SUFFIX = ".local.yaml"


def version() -> str:
    """CNPG's version without the ``v`` (``1.27.1``), from hack/k8s/versions.env."""
    for line in VERSIONS.read_text().splitlines():
        if line.startswith("CNPG_VERSION="):
            return line.split("=", 1)[1].strip().removeprefix("v")
    raise LookupError(f"no CNPG_VERSION in {VERSIONS}")


def operator_image(cnpg_version: str) -> str:
    """The image hack/images/build.sh builds around the manager."""
    return f"docker.io/attested-cortex/cloudnative-pg:{cnpg_version}"


def released_manifest(bin_dir: Path, cnpg_version: str) -> Path:
    """Where ensure-binaries.sh keeps the module's release manifest."""
    return bin_dir / f"cnpg-{cnpg_version}.yaml"


class ManifestShapeError(ValueError):
    """The release manifest is not shaped as the version we rewrite (a version bump changed it)."""


#: CloudNativePG's operator setting for its standbys' replication connections (``tcp_user_timeout``
#: in their ``primary_conninfo``, which has no ``connect_timeout``): a replica whose primary's pod
#: went away reconnects through the ``-rw`` Service, and a connect that reaches the gone pod's IP
#: hangs until TCP gives up (minutes). Measured (issue 38, ADR 0111): the surviving replica of
#: a failover never re-attached, so the new primary's first commit waited for the old primary's
#: pod to come back as a replica. With 1 s the connect fails and the replica tries again.
STANDBY_TCP_USER_TIMEOUT_ENV = "STANDBY_TCP_USER_TIMEOUT"
STANDBY_TCP_USER_TIMEOUT_MS = "1000"


def rewrite(documents: list[dict[str, Any]], *, operator: str,
            postgres: str = POSTGRES_IMAGE) -> list[dict[str, Any]]:
    """The release's documents with the operator Deployment pointed at our images.

    Fails (ManifestShapeError) unless exactly one Deployment with one ``manager`` container is
    found, so a later release that moves things is noticed here, not as a pod pulling from a
    registry this machine cannot reach.
    """
    out = [dict(d) for d in documents if d]
    deployments = [d for d in out if d.get("kind") == "Deployment"]
    if len(deployments) != 1 or deployments[0]["metadata"]["name"] != DEPLOYMENT:
        raise ManifestShapeError(f"expected one Deployment {DEPLOYMENT}, found "
                                 f"{[d['metadata']['name'] for d in deployments]}")
    deployment = yaml.safe_load(yaml.safe_dump(deployments[0]))  # a deep copy to edit
    containers = deployment["spec"]["template"]["spec"]["containers"]
    if [c["name"] for c in containers] != ["manager"]:
        raise ManifestShapeError(f"expected one container 'manager', found {containers}")
    manager = containers[0]
    manager["image"] = operator
    manager["imagePullPolicy"] = "IfNotPresent"
    env = [e for e in manager.get("env", []) if e["name"] != "POSTGRES_IMAGE_NAME"]
    names = [e["name"] for e in env]
    if "OPERATOR_IMAGE_NAME" not in names:
        raise ManifestShapeError("the manager has no OPERATOR_IMAGE_NAME to point at our image")
    for variable in env:
        if variable["name"] == "OPERATOR_IMAGE_NAME":
            variable["value"] = operator
    if STANDBY_TCP_USER_TIMEOUT_ENV not in names:
        env.append({"name": STANDBY_TCP_USER_TIMEOUT_ENV, "value": STANDBY_TCP_USER_TIMEOUT_MS})
    env.append({"name": "POSTGRES_IMAGE_NAME", "value": postgres})
    manager["env"] = env
    return [deployment if d is deployments[0] else d for d in out]


def local_manifest(bin_dir: Path, cnpg_version: str | None = None) -> Path:
    """The rewritten manifest, written once beside the released one (cached by version)."""
    cnpg_version = cnpg_version or version()
    source = released_manifest(bin_dir, cnpg_version)
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: run hack/k8s/ensure-binaries.sh cnpg")
    target = source.with_name(f"cnpg-{cnpg_version}{LOCAL_SUFFIX}")
    if target.is_file() and target.stat().st_mtime >= max(source.stat().st_mtime,
                                                          Path(__file__).stat().st_mtime):
        return target
    documents = rewrite(list(yaml.safe_load_all(source.read_text())),
                        operator=operator_image(cnpg_version))
    partial = target.with_suffix(".tmp")
    partial.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    partial.replace(target)
    return target


# A Cluster the webhooks must accept (server-side dry run: nothing is created): answers only
# once the mutating and validating webhooks are served with the CA CNPG injected.
PROBE_CLUSTER = """
apiVersion: postgresql.cnpg.io/v1
kind: Cluster
metadata: {name: webhook-probe, namespace: default}
spec:
  instances: 1
  storage: {size: 1Gi}
"""


@dataclass(frozen=True)
class Installer:
    """Installs the rewritten manifest with ``kubectl`` (a callable running kubectl args)."""

    kubectl: Callable[..., subprocess.CompletedProcess[str]]
    manifest: Path

    def apply(self) -> None:
        """Server-side apply (CNPG's CRDs are too large for the client-side annotation)."""
        done = self.kubectl("apply", "--server-side", "--force-conflicts",
                            "--field-manager=attested-cortex-cnpg", "-f", str(self.manifest))
        if done.returncode != 0:
            raise RuntimeError(f"kubectl apply of {self.manifest} failed: {done.stderr}")

    def deployment_available(self) -> bool:
        done = self.kubectl("-n", NAMESPACE, "get", "deployment", DEPLOYMENT, "-o",
                            "jsonpath={.status.availableReplicas}")
        return done.returncode == 0 and done.stdout.strip() not in ("", "0")

    def webhooks_answer(self) -> bool:
        """A Cluster passes CNPG's admission webhooks (dry run: the API server called them)."""
        done = self.kubectl("apply", "--dry-run=server", "-f", "-", input=PROBE_CLUSTER)
        return done.returncode == 0

    def uninstall(self) -> None:
        """Deletes what apply made (CRDs too: every Cluster goes with them)."""
        self.kubectl("delete", "--ignore-not-found", "--wait=true", "-f", str(self.manifest))
