"""A handle on a running local Kubernetes control plane: kubectl and helm bound to its admin
kubeconfig, and more static volumes on demand.

Callers: tests/support/kube.py (the pytest ``kube`` fixture starts the plane and hands out a
:class:`Kube`), bench/operator.py (the same handle on its own plane). The plane itself is
hack/k8s/localkube. The cluster has a default StorageClass ``local`` and 32 static 10Gi volumes,
and kwok pods owned by a Job succeed unless annotated ``FAIL_ANNOTATION``.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from hack.k8s.localkube import storage

COMMAND_TIMEOUT_S = 120.0
POLL_INTERVAL_S = 1.0
FAIL_ANNOTATION = "kwok.attested.dev/fail"
FAIL_MESSAGE_ANNOTATION = "kwok.attested.dev/fail-message"


class CommandFailedError(AssertionError):
    """kubectl or helm exited non-zero; the message carries its output."""


def service_account_user(namespace: str, name: str) -> str:
    """The user name the API server gives a service account (for impersonation)."""
    return f"system:serviceaccount:{namespace}:{name}"


@dataclass(frozen=True)
class Kube:
    """Handle on the running control plane: paths and kubectl/helm bound to its admin config."""

    kubeconfig: Path
    bin_dir: Path
    server: str
    home: Path
    volume_directory: Path

    @property
    def env(self) -> dict[str, str]:
        """Environment for clients: this cluster's kubeconfig, caches kept out of $HOME."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig),
                "KUBECACHEDIR": str(self.home / "kube-cache"),
                "HELM_CACHE_HOME": str(self.home / "helm-cache"),
                "HELM_CONFIG_HOME": str(self.home / "helm-config"),
                "HELM_DATA_HOME": str(self.home / "helm-data")}

    def run(self, tool: str, *args: str, input: str | None = None,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin_dir / tool), *args]
        result = subprocess.run(command, input=input, capture_output=True, text=True,
                                env=self.env, timeout=COMMAND_TIMEOUT_S, check=False)
        if check and result.returncode != 0:
            raise CommandFailedError(f"{tool} {' '.join(args)} exited {result.returncode}\n"
                                     f"stdout:\n{result.stdout}\nstderr:\n{result.stderr}")
        return result

    def kubectl(self, *args: str, input: str | None = None,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("kubectl", *args, input=input, check=check)

    def helm(self, *args: str, input: str | None = None,
             check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("helm", *args, input=input, check=check)

    def impersonate_kubectl(self, user_or_sa: str, *args: str, input: str | None = None,
                            check: bool = True) -> subprocess.CompletedProcess[str]:
        """kubectl as another user, e.g. ``service_account_user("ns", "operator")``."""
        return self.kubectl(f"--as={user_or_sa}", *args, input=input, check=check)

    def add_volumes(self, count: int, *, size: str = storage.VOLUME_SIZE,
                    storage_class: str = storage.STORAGE_CLASS) -> list[str]:
        """Create ``count`` more static PersistentVolumes; returns their names.

        The cluster starts with 32 volumes of 10Gi in the default class ``local``; a volume
        whose claim was deleted stays Released (``Retain``), so a test that binds many
        claims, or wants another size or class, adds its own first.
        """
        names = [f"{storage.VOLUME_PREFIX}{uuid.uuid4().hex[:10]}" for _ in range(count)]
        volumes = [storage.persistent_volume(name, directory=self.volume_directory, size=size,
                                             storage_class_name=storage_class)
                   for name in names]
        self.kubectl("create", "-f", "-",
                     input=json.dumps({"apiVersion": "v1", "kind": "List", "items": volumes}))
        return names


