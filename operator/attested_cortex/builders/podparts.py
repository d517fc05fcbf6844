"""Pieces shared by the server and migration pods: the database URI variable. Pure."""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders import clusters, names
from attested_cortex.builders.inputs import Cortex
from attested_cortex.builders.secrets import URI_KEY

Object = dict[str, Any]

#: ``cortexctl serve`` and ``migrate`` read the URI from here when no flag gives it.
DATABASE_URL_ENV: Final = "CORTEX_DATABASE_URL"


def connection_secret(cortex: Cortex) -> tuple[str, str]:
    """(Secret name, key) of the connection URI: generated (managed), referenced
    (external) or CloudNativePG's application Secret (its URI names the ``-rw`` Service)."""
    external = cortex.spec.database.external
    if external is not None:
        return external.secret_ref.name, external.secret_ref.key
    if cortex.spec.database.cloud_native_pg is not None:
        return clusters.app_secret_name(cortex.meta.name), clusters.APP_URI_KEY
    return names.db_secret_name(cortex.meta.name), URI_KEY


def database_env(cortex: Cortex) -> Object:
    """The URI as an environment variable from its Secret (never in args or a ConfigMap)."""
    secret, key = connection_secret(cortex)
    return {"name": DATABASE_URL_ENV,
            "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}
