"""Where the operator's writes go: the :class:`~attested_cortex.kubeclient.Connection` made
from kopf's own login, so that the writes and kopf's watches reach one API server as one
identity.

kopf stays here: :mod:`attested_cortex.kubeclient` is shared with the server, which does not
load kopf (ADR 0022). Called by :mod:`.registry`.
"""

from __future__ import annotations

import os
from typing import Any

import kopf

from attested_cortex.kubeclient import Connection


def connection_info() -> kopf.ConnectionInfo:
    """In-cluster service account when there is one, else ``$KUBECONFIG`` (kopf's login)."""
    settings = kopf.OperatorSettings()
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get(
        "KUBERNETES_SERVICE_PORT", "443")
    info = kopf.login_with_service_account(settings=settings) if host else None
    if info is not None:
        bracketed = f"[{host}]" if host and ":" in host else host
        return kopf.ConnectionInfo(server=f"https://{bracketed}:{port}", ca_path=info.ca_path,
                                   token=info.token, default_namespace=info.default_namespace,
                                   priority=info.priority)
    info = kopf.login_with_kubeconfig(settings=settings)
    if info is None:
        raise kopf.LoginError("no service account and no kubeconfig to reach the API server")
    return info


def login() -> Connection:
    """What :func:`connection_info` found, for :class:`~attested_cortex.kubeclient.KubeApi`."""
    info = connection_info()

    def path(value: Any) -> str | None:
        return None if value is None else os.fsdecode(value)

    return Connection(
        server=info.server, ca_path=path(info.ca_path), ca_data=info.ca_data,
        insecure=bool(info.insecure), token=info.token,
        certificate_path=path(info.certificate_path), certificate_data=info.certificate_data,
        private_key_path=path(info.private_key_path), private_key_data=info.private_key_data,
    )
