"""The CloudNativePG Cluster built from a ``cloudNativePG`` cortex: literals in, object out,
and every built object valid against the Cluster CRD's schema of CloudNativePG 1.27.1."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from attested_cortex.builders import podparts
from attested_cortex.builders.clusters import build_cluster
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.jobs import build_migration_job
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, assert_child_metadata, cortex
from tests.support.cnpgcrd import cluster_schema

Object = dict[str, Any]
NS_UID = "6f1c2d3e-0000-4000-8000-00000000000a"

FULL = {"instances": 3, "storage": {"size": "20Gi", "storageClassName": "fast-ssd"},
        "synchronous": {"number": 1, "method": "first", "dataDurability": "preferred"},
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                      "limits": {"memory": "2Gi"}},
        "parameters": {"work_mem": "16MB", "max_connections": "200"},
        "imageName": "registry.example/pg-age:17.6", "podMonitor": True}


def cnpg(fields: Object | None = None) -> Any:
    return cortex({"database": {"cloudNativePG": fields or {}}})


def undeclared(value: Any, schema: Object, where: str = "") -> list[str]:
    """Fields the schema does not declare: the API server would prune them silently."""
    if isinstance(value, dict) and "properties" in schema:
        out = []
        for key, item in value.items():
            declared = schema["properties"].get(key)
            out += ([f"{where}.{key}"] if declared is None
                    else undeclared(item, declared, f"{where}.{key}"))
        return out
    if isinstance(value, list) and "items" in schema:
        return [bad for i, item in enumerate(value)
                for bad in undeclared(item, schema["items"], f"{where}[{i}]")]
    return []


@pytest.mark.parametrize("fields", [{}, FULL, {"instances": 1}], ids=["defaults", "full", "one"])
def test_built_cluster_is_valid_for_cloudnativepg_1_27(fields: Object) -> None:
    cluster = build_cluster(cnpg(fields), DEFAULTS, namespace_uid=NS_UID)
    schema = cluster_schema()
    errors = [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(cluster)]
    assert errors == []
    assert undeclared(cluster, schema) == []


def test_controlled_by_the_cortex_owned_by_its_namespace_too() -> None:
    cluster = build_cluster(cnpg(), DEFAULTS, namespace_uid=NS_UID)
    assert (cluster["apiVersion"], cluster["kind"]) == ("postgresql.cnpg.io/v1", "Cluster")
    cortex_ref, namespace_ref = cluster["metadata"]["ownerReferences"]
    assert namespace_ref == {"apiVersion": "v1", "kind": "Namespace", "name": NAMESPACE,
                             "uid": NS_UID}
    cluster["metadata"]["ownerReferences"] = [cortex_ref]
    assert_child_metadata(cluster, name=f"{CORTEX}-db", component="database")
    inherited = cluster["spec"]["inheritedMetadata"]["labels"]
    assert inherited == {"app.kubernetes.io/name": "attested-cortex",
                         "app.kubernetes.io/instance": CORTEX,
                         "app.kubernetes.io/component": "database"}


def test_defaults_three_instances_our_image_and_age_preloaded() -> None:
    spec = build_cluster(cnpg(), DEFAULTS, namespace_uid=NS_UID)["spec"]
    assert spec["instances"] == 3
    assert spec["imageName"] == DEFAULTS.postgres_image
    assert (spec["postgresUID"], spec["postgresGID"]) == (999, 999)
    assert spec["postgresql"]["shared_preload_libraries"] == ["age"]
    # replicas retry streaming every second: a promotion's survivor follows at once
    assert spec["postgresql"]["parameters"] == {"wal_retrieve_retry_interval": "200ms"}
    assert "synchronous" not in spec["postgresql"]
    assert spec["storage"] == {"size": "10Gi"}
    assert "resources" not in spec
    assert spec["monitoring"] == {"enablePodMonitor": False}
    assert spec["enableSuperuserAccess"] is False
    # A deleted primary stops at once: no failover waits for the pool's sessions to end.
    assert spec["smartShutdownTimeout"] == 0


def test_bootstrap_creates_the_database_its_owner_and_the_extensions() -> None:
    spec = build_cluster(cnpg(), DEFAULTS, namespace_uid=NS_UID)["spec"]
    initdb = spec["bootstrap"]["initdb"]
    assert (initdb["database"], initdb["owner"]) == ("cortex", "cortex")
    assert initdb["postInitApplicationSQL"] == [
        "CREATE EXTENSION IF NOT EXISTS age", "CREATE EXTENSION IF NOT EXISTS vector",
        "GRANT USAGE ON SCHEMA ag_catalog TO cortex",
        "GRANT SELECT ON ALL TABLES IN SCHEMA ag_catalog TO cortex"]


def test_user_choices_pass_through() -> None:
    spec = build_cluster(cnpg(FULL), DEFAULTS, namespace_uid=NS_UID)["spec"]
    assert spec["instances"] == 3
    assert spec["imageName"] == "registry.example/pg-age:17.6"
    assert spec["storage"] == {"size": "20Gi", "storageClass": "fast-ssd"}
    assert spec["postgresql"]["synchronous"] == {"method": "first", "number": 1,
                                                 "dataDurability": "preferred"}
    assert spec["postgresql"]["parameters"] == {"max_connections": "200",
                                                "wal_retrieve_retry_interval": "200ms",
                                                "work_mem": "16MB"}
    assert spec["postgresql"]["shared_preload_libraries"] == ["age"]
    assert spec["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"},
                                 "limits": {"memory": "2Gi"}}
    assert spec["monitoring"] == {"enablePodMonitor": True}


def test_replica_retry_is_the_users_when_set_and_absent_without_replicas() -> None:
    chosen = cnpg({"parameters": {"wal_retrieve_retry_interval": "3s"}})
    spec = build_cluster(chosen, DEFAULTS, namespace_uid=NS_UID)["spec"]
    assert spec["postgresql"]["parameters"] == {"wal_retrieve_retry_interval": "3s"}
    alone = build_cluster(cnpg({"instances": 1}), DEFAULTS, namespace_uid=NS_UID)["spec"]
    assert alone["postgresql"]["parameters"] == {}


def test_synchronous_defaults_to_a_quorum_that_requires_durability() -> None:
    wanted = cnpg({"synchronous": {"number": 2}, "instances": 3})
    spec = build_cluster(wanted, DEFAULTS, namespace_uid=NS_UID)["spec"]
    assert spec["postgresql"]["synchronous"] == {"method": "any", "number": 2,
                                                 "dataDurability": "required"}


def test_same_spec_same_object() -> None:
    first, again = (build_cluster(cnpg(FULL), DEFAULTS, namespace_uid=NS_UID) for _ in "ab")
    assert first == again


def test_only_for_a_cloudnativepg_cortex() -> None:
    with pytest.raises(ValueError, match="cloudNativePG"):
        build_cluster(cortex(), DEFAULTS, namespace_uid=NS_UID)


def test_migration_and_server_read_the_app_secret_by_reference() -> None:
    assert podparts.connection_secret(cnpg()) == (f"{CORTEX}-db-app", "uri")
    job = build_migration_job(cnpg(), DEFAULTS)
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "CORTEX_DATABASE_URL", "valueFrom": {
        "secretKeyRef": {"name": f"{CORTEX}-db-app", "key": "uri"}}}]


def test_the_server_reads_the_app_secret_by_reference() -> None:
    deployment = build_deployment(cnpg(), DEFAULTS, Satellites())
    server = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "CORTEX_DATABASE_URL", "valueFrom": {
        "secretKeyRef": {"name": f"{CORTEX}-db-app", "key": "uri"}}} in server["env"]
    assert f"{CORTEX}-db-app" not in str(server.get("args", []))
