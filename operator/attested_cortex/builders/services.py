"""Services: the database's headless Service and the server's Service. Pure."""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.secrets import DB_PORT

Object = dict[str, Any]

SERVER_PORT: Final = 8080


def build_db_service(cortex: Cortex) -> Object:
    """Headless Service giving the database pod its stable DNS name."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": names.metadata(names.db_name(cortex.meta.name), cortex.meta,
                                   component="database"),
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": False,
                 "selector": names.selector(cortex.meta.name, "database"),
                 "ports": [{"name": "postgres", "port": DB_PORT, "targetPort": "postgres",
                            "protocol": "TCP"}]},
    }


def port_name(cortex: Cortex) -> str:
    """``https`` when the server serves TLS, else ``http``: the container port's and the
    Service port's name (what a mesh or an ingress reads the protocol from)."""
    return "https" if cortex.spec.server.tls is not None else "http"


def build_server_service(cortex: Cortex) -> Object:
    """The memory server's Service (type and port from ``spec.server.service``)."""
    service = cortex.spec.server.service
    port = port_name(cortex)
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": names.metadata(names.service_name(cortex.meta.name), cortex.meta,
                                   component="server"),
        "spec": {"type": service.type, "selector": names.selector(cortex.meta.name, "server"),
                 "ports": [{"name": port, "port": service.port, "targetPort": port,
                            "protocol": "TCP"}]},
    }


def endpoint(cortex: Cortex) -> str:
    """The in-cluster URL of the memory server (reported in status)."""
    service = names.service_name(cortex.meta.name)
    return (f"{port_name(cortex)}://{service}.{cortex.meta.namespace}.svc:"
            f"{cortex.spec.server.service.port}")
