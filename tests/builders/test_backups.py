"""Backups and restores of a ``cloudNativePG`` cortex (builders/backups.py, clusters.py):
spec literals in, the Cluster's sections and the ScheduledBackup out, each valid against
CloudNativePG 1.27.1's own CRD schemas; and the CEL and patterns of the CRD fields."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from attested_cortex.builders.backups import build_scheduled_backup, destination, postgres_time
from attested_cortex.builders.clusters import build_cluster
from attested_cortex.builders.inputs import InvalidSpecError
from tests.builders.specs import CORTEX, DEFAULTS, assert_child_metadata, cortex
from tests.builders.test_clusters import NS_UID, undeclared
from tests.support.cnpgcrd import all_crds, cluster_schema

Object = dict[str, Any]
STORE = {"endpoint": "http://minio.backups:9000", "bucket": "cortex-backups",
         "path": "team-a/prod", "credentialsSecretRef": {"name": "s3-creds"}}
BARMAN = {"destinationPath": "s3://cortex-backups/team-a/prod",
          "endpointURL": "http://minio.backups:9000",
          "s3Credentials": {"accessKeyId": {"name": "s3-creds", "key": "ACCESS_KEY_ID"},
                            "secretAccessKey": {"name": "s3-creds",
                                                "key": "ACCESS_SECRET_KEY"}},
          "wal": {"compression": "gzip"}, "data": {"compression": "gzip"}}


def cnpg(fields: Object) -> Any:
    return cortex({"database": {"cloudNativePG": fields}})


def schema_of(kind: str) -> Object:
    crd = next(c for c in all_crds() if c["spec"]["names"]["kind"] == kind)
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")
    schema: Object = version["schema"]["openAPIV3Schema"]
    return schema


def valid(obj: Object, schema: Object) -> None:
    assert [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(obj)] == []
    assert undeclared(obj, schema) == []


def test_backup_turns_on_wal_archiving_to_the_object_store() -> None:
    cluster = build_cluster(cnpg({"backup": {"objectStore": STORE, "retention": "14d"}}),
                            DEFAULTS, namespace_uid=NS_UID)
    assert cluster["spec"]["backup"] == {"barmanObjectStore": {  # no spread checkpoint
        **BARMAN, "data": {"compression": "gzip", "immediateCheckpoint": True}},
        "retentionPolicy": "14d"}
    assert "initdb" in cluster["spec"]["bootstrap"]
    valid(cluster, cluster_schema())


def test_no_backup_no_backup_section() -> None:
    cluster = build_cluster(cnpg({}), DEFAULTS, namespace_uid=NS_UID)
    assert "backup" not in cluster["spec"] and "externalClusters" not in cluster["spec"]


def test_scheduled_backup_is_the_cortex_s_on_its_cluster() -> None:
    built = build_scheduled_backup(
        cnpg({"backup": {"objectStore": STORE}}),
        cnpg({"backup": {"objectStore": STORE}}).spec.database.cloud_native_pg.backup)
    assert (built["apiVersion"], built["kind"]) == ("postgresql.cnpg.io/v1", "ScheduledBackup")
    assert_child_metadata(built, name=f"{CORTEX}-db", component="database")
    assert built["spec"] == {"schedule": "0 0 3 * * *", "immediate": True,
                             "cluster": {"name": f"{CORTEX}-db"},
                             "method": "barmanObjectStore", "backupOwnerReference": "cluster"}
    valid(built, schema_of("ScheduledBackup"))


def test_restore_from_the_source_s_folder_to_a_time() -> None:
    recovery = {"objectStore": {**STORE, "path": None}, "sourceCortex": "old-notes",
                "targetTime": "2026-12-02T12:00:00Z"}
    cluster = build_cluster(cnpg({"bootstrap": {"recovery": recovery}}), DEFAULTS,
                            namespace_uid=NS_UID)
    assert cluster["spec"]["bootstrap"] == {"recovery": {
        "database": "cortex", "owner": "cortex", "source": "origin",
        "recoveryTarget": {"targetTime": "2026-12-02 12:00:00.000000+00"}}}
    assert cluster["spec"]["externalClusters"] == [{"name": "origin", "barmanObjectStore": {
        **BARMAN, "destinationPath": "s3://cortex-backups/", "serverName": "old-notes-db"}}]
    valid(cluster, cluster_schema())


def test_target_time_reaches_postgres_with_a_numeric_offset() -> None:
    assert postgres_time("2026-12-02T13:56:36Z") == "2026-12-02 13:56:36.000000+00"
    assert postgres_time("2026-12-02T15:56:36.25+02:00") == "2026-12-02 13:56:36.250000+00"


def test_restore_from_a_backup_by_name_to_its_end() -> None:
    cluster = build_cluster(cnpg({"bootstrap": {"recovery": {"backupName": "notes-db-2026"}}}),
                            DEFAULTS, namespace_uid=NS_UID)
    assert cluster["spec"]["bootstrap"] == {"recovery": {
        "database": "cortex", "owner": "cortex", "backup": {"name": "notes-db-2026"}}}
    assert "externalClusters" not in cluster["spec"]
    valid(cluster, cluster_schema())


@pytest.mark.parametrize(("fields", "where"), [
    ({"backup": {"objectStore": {**STORE, "bucket": "No_Such"}}}, "objectStore.bucket"),
    ({"backup": {"objectStore": {**STORE, "endpoint": "minio:9000"}}}, "objectStore.endpoint"),
    ({"backup": {"objectStore": {**STORE, "path": "/abs/"}}}, "objectStore.path"),
    ({"backup": {"objectStore": STORE, "retention": "30 days"}}, "backup.retention"),
    ({"backup": {"objectStore": STORE, "schedule": "0 3 * * *"}}, "backup.schedule"),
    ({"bootstrap": {"recovery": {"backupName": "b", "targetTime": "noon"}}}, "targetTime"),
], ids=["bucket", "endpoint", "path", "retention", "five-field-cron", "time"])
def test_fields_refuse_what_cloudnativepg_would_not_take(fields: Object, where: str) -> None:
    with pytest.raises(InvalidSpecError, match=where.replace(".", r"\.")):
        cnpg(fields)


def test_the_destination_has_no_slash_after_the_path() -> None:
    """barman-cloud keeps a slash after the path in its prefix, and its retention run lists
    ``<prefix>/<server>/base/``: ``path//server`` that MinIO refuses, CloudNativePG's
    RetentionPolicyFailed after every backup (issue 38 item 9)."""
    store = cortex({"database": {"cloudNativePG": {"instances": 1, "backup": {
        "objectStore": STORE}}}}).spec.database.cloud_native_pg
    assert store is not None and store.backup is not None
    assert destination(store.backup.object_store) == "s3://cortex-backups/team-a/prod"
    bare = store.backup.object_store.model_copy(update={"path": None})
    assert destination(bare) == "s3://cortex-backups/"
