"""Kubeconfig files for the local control plane's clients (admin, controllers, kwok).

Callers: controlplane.py. Kubeconfigs reference certificate files by path rather than
embedding them, so secrets stay in the 0600 key files; JSON is valid kubeconfig YAML.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TypedDict

from .layouts import Layout
from .pki import CA

CLUSTER = "attested-cortex-local"


RawKubeconfig = TypedDict("RawKubeconfig", {
    "apiVersion": str,
    "kind": str,
    "clusters": list[dict[str, object]],
    "users": list[dict[str, object]],
    "contexts": list[dict[str, object]],
    "current-context": str,
})


def build_kubeconfig(layout: Layout, *, server: str, user: str) -> RawKubeconfig:
    """A kubeconfig for ``user`` authenticating with its client certificate to ``server``."""
    raw: RawKubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {
            "server": server, "certificate-authority": str(layout.cert(CA))}}],
        "users": [{"name": user, "user": {
            "client-certificate": str(layout.cert(user)), "client-key": str(layout.key(user))}}],
        "contexts": [{"name": CLUSTER, "context": {"cluster": CLUSTER, "user": user}}],
        "current-context": CLUSTER,
    }
    return raw


def write_kubeconfig(layout: Layout, *, server: str, user: str) -> Path:
    path = layout.kubeconfig(user)
    path.write_text(json.dumps(build_kubeconfig(layout, server=server, user=user), indent=2))
    path.chmod(0o600)
    return path
