"""A real local Kubernetes control plane: etcd, kube-apiserver, controllers, scheduler, kwok.

Callers: tests/support/kube.py (the pytest ``kube`` fixture), hack/k8s/controlplane.py (the
``up`` command used by ``make run``). Standard library only, plus the ``openssl`` CLI, so it
runs from any Python 3.11 without the project's virtualenv.
"""

from .controlplane import ControlPlane, ControlPlaneError
from .layouts import Layout

__all__ = ["ControlPlane", "ControlPlaneError", "Layout"]
