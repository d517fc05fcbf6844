"""The database's NetworkPolicy: only this cortex's server pods, migration Jobs and logical
backup runs get in."""

from __future__ import annotations

from typing import Any

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.secrets import DB_PORT

Object = dict[str, Any]


def build_db_network_policy(cortex: Cortex) -> Object:
    """Ingress to the database pod from the server, migration and backup pods of the same
    cortex."""
    peers = [{"podSelector": {"matchLabels": names.selector(cortex.meta.name, component)}}
             for component in ("server", "migration", "backup")]
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": names.metadata(names.db_name(cortex.meta.name), cortex.meta,
                                   component="database"),
        "spec": {
            "podSelector": {"matchLabels": names.selector(cortex.meta.name, "database")},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers, "ports": [{"protocol": "TCP", "port": DB_PORT}]}],
        },
    }
