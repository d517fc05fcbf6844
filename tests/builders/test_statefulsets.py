"""The managed database StatefulSet built from a MemoryCortex spec."""

import json

import pytest

from attested_cortex.builders.statefulsets import build_statefulset
from tests.builders.specs import (
    CORTEX,
    DEFAULTS,
    assert_child_metadata,
    assert_restricted,
    container,
    cortex,
    env_of,
    external_cortex,
)


def test_metadata_labels_and_owner() -> None:
    sts = build_statefulset(cortex(), DEFAULTS)
    assert sts["apiVersion"] == "apps/v1" and sts["kind"] == "StatefulSet"
    assert_child_metadata(sts, name=f"{CORTEX}-db", component="database")
    template = sts["spec"]["template"]
    assert template["metadata"]["labels"] == sts["metadata"]["labels"]
    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector.items() <= template["metadata"]["labels"].items()
    assert selector["app.kubernetes.io/component"] == "database"
    assert sts["spec"]["serviceName"] == f"{CORTEX}-db"


def test_same_spec_same_object() -> None:
    assert build_statefulset(cortex(), DEFAULTS) == build_statefulset(cortex(), DEFAULTS)


def test_pod_template_is_restricted() -> None:
    template = build_statefulset(cortex(), DEFAULTS)["spec"]["template"]
    assert_restricted(template)
    assert template["spec"]["automountServiceAccountToken"] is False


def test_image_defaults_to_the_operator_setting() -> None:
    sts = build_statefulset(cortex(), DEFAULTS)
    assert container(sts["spec"]["template"], "postgres")["image"] == DEFAULTS.postgres_image


def test_image_from_spec_wins() -> None:
    spec = {"database": {"managed": {"image": "mirror.example/pg-age:17.2"}}}
    sts = build_statefulset(cortex(spec), DEFAULTS)
    assert container(sts["spec"]["template"], "postgres")["image"] == "mirror.example/pg-age:17.2"


def test_storage_size_and_default_class() -> None:
    claim = build_statefulset(cortex(), DEFAULTS)["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert "storageClassName" not in claim["spec"]  # the cluster default
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_storage_size_and_class_from_spec() -> None:
    spec = {"database": {"managed": {"storage": {"size": "250Gi",
                                                 "storageClassName": "fast-ssd"}}}}
    claim = build_statefulset(cortex(spec), DEFAULTS)["spec"]["volumeClaimTemplates"][0]
    assert claim["spec"]["resources"]["requests"]["storage"] == "250Gi"
    assert claim["spec"]["storageClassName"] == "fast-ssd"


def test_claims_survive_deletion_and_scale_down() -> None:
    policy = build_statefulset(cortex(), DEFAULTS)["spec"]["persistentVolumeClaimRetentionPolicy"]
    assert policy == {"whenDeleted": "Retain", "whenScaled": "Retain"}


def test_password_comes_from_the_credentials_secret_as_a_file() -> None:
    template = build_statefulset(cortex(), DEFAULTS)["spec"]["template"]
    postgres = container(template, "postgres")
    env = env_of(postgres)
    assert "POSTGRES_PASSWORD" not in env
    path = env["POSTGRES_PASSWORD_FILE"]["value"]
    mount_dir, _, key = path.rpartition("/")
    mount = next(m for m in postgres["volumeMounts"] if m["mountPath"] == mount_dir)
    assert mount["readOnly"] is True
    volume = next(v for v in template["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == f"{CORTEX}-db-credentials"
    assert volume["secret"]["items"] == [{"key": key, "path": key}]
    assert volume["secret"]["defaultMode"] & 0o007 == 0  # not world-readable


def test_no_literal_secret_anywhere() -> None:
    """The builder never sees the password: nothing secret-looking is in the object."""
    sts = build_statefulset(cortex(), DEFAULTS)
    assert "postgresql://" not in json.dumps(sts)
    for env in env_of(container(sts["spec"]["template"], "postgres")).values():
        assert "valueFrom" in env or env["name"] in {"POSTGRES_USER", "POSTGRES_DB",
                                                      "POSTGRES_PASSWORD_FILE", "PGDATA"}


def test_pgdata_is_a_directory_inside_the_data_volume() -> None:
    postgres = container(build_statefulset(cortex(), DEFAULTS)["spec"]["template"], "postgres")
    pgdata = env_of(postgres)["PGDATA"]["value"]
    data_mount = next(m for m in postgres["volumeMounts"] if m["name"] == "data")["mountPath"]
    assert pgdata.startswith(data_mount + "/") and pgdata != data_mount


def test_resources_from_spec() -> None:
    spec = {"database": {"managed": {"resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                   "limits": {"memory": "2Gi"}}}}}
    postgres = container(build_statefulset(cortex(spec), DEFAULTS)["spec"]["template"],
                         "postgres")
    assert postgres["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"},
                                     "limits": {"memory": "2Gi"}}


def test_writable_paths_are_volumes() -> None:
    postgres = container(build_statefulset(cortex(), DEFAULTS)["spec"]["template"], "postgres")
    paths = {m["mountPath"] for m in postgres["volumeMounts"]}
    assert {"/var/run/postgresql", "/tmp"} <= paths


def test_external_database_has_no_statefulset() -> None:
    with pytest.raises(ValueError, match=r"spec\.database\.managed"):
        build_statefulset(external_cortex(), DEFAULTS)
