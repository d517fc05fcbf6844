"""The schema migration Job built from a MemoryCortex spec."""

from attested_cortex.builders.jobs import build_migration_job, target_version
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


def test_target_defaults_to_the_newest_schema_of_this_build() -> None:
    job = build_migration_job(cortex(), DEFAULTS)
    assert target_version(cortex(), DEFAULTS) == DEFAULTS.schema_version
    assert job["metadata"]["name"] == f"{CORTEX}-migrate-v{DEFAULTS.schema_version}"
    migrate = container(job["spec"]["template"], "migrate")
    assert migrate["command"] == ["cortexctl"]
    # it waits for a database still starting instead of failing its first pod (issue 38)
    assert migrate["args"] == ["migrate", "--target", str(DEFAULTS.schema_version),
                               "--wait-seconds", "300"]
    assert job["metadata"]["annotations"] == {
        "cortex.attested.dev/schema-version": str(DEFAULTS.schema_version)}


def test_explicit_target_names_the_job_and_the_command() -> None:
    job = build_migration_job(cortex({"schema": {"targetVersion": 3}}), DEFAULTS)
    assert job["metadata"]["name"] == f"{CORTEX}-migrate-v3"
    assert container(job["spec"]["template"], "migrate")["args"][:3] == ["migrate", "--target", "3"]


def test_one_name_per_target_version() -> None:
    first = build_migration_job(cortex({"schema": {"targetVersion": 3}}), DEFAULTS)
    again = build_migration_job(cortex({"schema": {"targetVersion": 3}}), DEFAULTS)
    newer = build_migration_job(cortex({"schema": {"targetVersion": 4}}), DEFAULTS)
    assert first == again
    assert first["metadata"]["name"] != newer["metadata"]["name"]


def test_metadata_labels_and_owner() -> None:
    job = build_migration_job(cortex(), DEFAULTS)
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert_child_metadata(job, name=f"{CORTEX}-migrate-v{DEFAULTS.schema_version}",
                          component="migration")
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/component"] == "migration"
    assert pod_labels["app.kubernetes.io/instance"] == CORTEX


def test_retries_and_cleanup() -> None:
    spec = build_migration_job(cortex(), DEFAULTS)["spec"]
    assert spec["backoffLimit"] == 3
    assert spec["ttlSecondsAfterFinished"] == 24 * 3600
    assert spec["activeDeadlineSeconds"] > 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    migrate = container(spec["template"], "migrate")
    assert migrate["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_pod_template_is_restricted() -> None:
    template = build_migration_job(cortex(), DEFAULTS)["spec"]["template"]
    assert_restricted(template)
    assert template["spec"]["automountServiceAccountToken"] is False


def test_managed_database_url_from_the_generated_secret() -> None:
    migrate = container(build_migration_job(cortex(), DEFAULTS)["spec"]["template"], "migrate")
    assert env_of(migrate)["CORTEX_DATABASE_URL"] == {
        "name": "CORTEX_DATABASE_URL",
        "valueFrom": {"secretKeyRef": {"name": f"{CORTEX}-db-credentials", "key": "uri"}}}


def test_external_database_url_from_the_referenced_secret() -> None:
    job = build_migration_job(external_cortex(), DEFAULTS)
    migrate = container(job["spec"]["template"], "migrate")
    assert env_of(migrate)["CORTEX_DATABASE_URL"]["valueFrom"] == {
        "secretKeyRef": {"name": "shared-pg", "key": "dsn"}}


def test_external_secret_key_defaults_to_uri() -> None:
    spec = {"database": {"external": {"secretRef": {"name": "shared-pg"}}}}
    migrate = container(build_migration_job(cortex(spec), DEFAULTS)["spec"]["template"],
                        "migrate")
    assert env_of(migrate)["CORTEX_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "shared-pg", "key": "uri"}


def test_image_is_the_server_image() -> None:
    default = build_migration_job(cortex(), DEFAULTS)["spec"]["template"]
    assert container(default, "migrate")["image"] == DEFAULTS.server_image
    custom = build_migration_job(cortex({"server": {"image": "mirror.example/cortex:2"}}),
                                 DEFAULTS)["spec"]["template"]
    assert container(custom, "migrate")["image"] == "mirror.example/cortex:2"
    assert container(custom, "migrate")["imagePullPolicy"] == DEFAULTS.image_pull_policy
