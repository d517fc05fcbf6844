"""Names and labels of every child of a MemoryCortex: deterministic, within Kubernetes'
limits for the longest accepted cortex name, and distinct per cortex."""

import re

from attested_cortex.builders import names
from attested_cortex.builders.access import build_disruption_budget, build_service_account
from attested_cortex.builders.certificates import (
    build_ca_bundle,
    build_ca_secret,
    build_certificate,
    build_leaf_secret,
)
from attested_cortex.builders.configmaps import Satellites, build_config_map
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.inputs import MAX_CORTEX_NAME, Cortex
from attested_cortex.builders.jobs import build_migration_job
from attested_cortex.builders.logicalbackups import build_logical_backup_cronjob
from attested_cortex.builders.networkpolicies import build_db_network_policy
from attested_cortex.builders.secrets import (
    build_approval_secret,
    build_audit_signer_secret,
    build_db_credentials,
    build_master_key_secret,
)
from attested_cortex.builders.services import build_db_service, build_server_service
from attested_cortex.builders.statefulsets import build_statefulset
from tests.builders.specs import DEFAULTS, Object, assert_child_metadata, cortex

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def children(c: Cortex) -> list[Object]:
    return [build_statefulset(c, DEFAULTS), build_db_service(c), build_db_network_policy(c),
            build_db_credentials(c, "pw"), build_migration_job(c, DEFAULTS),
            build_deployment(c, DEFAULTS, Satellites()), build_server_service(c),
            build_config_map(c, Satellites()), build_approval_secret(c, "00"),
            build_audit_signer_secret(c, {"agent-id": "cortex:a/b"}, namespace_uid="ns-uid"),
            build_master_key_secret(c, {"current": "v1"}, namespace_uid="ns-uid"),
            build_service_account(c), build_disruption_budget(c),
            build_logical_backup_cronjob(with_backup(c), DEFAULTS), *tls_children(c)]


def tls_children(c: Cortex) -> list[Object]:
    """The TLS objects: a selfSigned cortex's Secrets and bundle, a certManager one's
    Certificate (the same names whatever the spec)."""
    managed = cortex({"server": {"tls": {"certManager": {"issuerRef": {"name": "i"}}}}},
                     name=c.meta.name)
    return [build_ca_secret(c, cert_pem="ca", key_pem="k"),
            build_leaf_secret(c, cert_pem="c", key_pem="k", ca_pem="ca"),
            build_ca_bundle(c, "ca"), build_certificate(managed)]




def with_backup(c: Cortex) -> Cortex:
    store = {"endpoint": "http://s3:9000", "bucket": "bkt", "credentialsSecretRef": {"name": "k"}}
    return cortex({"backup": {"logical": {"objectStore": store}}}, name=c.meta.name)


def component_of(obj: Object, c: Cortex) -> str:
    name = obj["metadata"]["name"]
    if obj["kind"] == "Job":
        return "migration"
    if obj["kind"] == "CronJob":
        return "backup"
    if name in (names.db_name(c.meta.name), names.db_secret_name(c.meta.name)):
        return "database"
    return "server"


def test_every_child_has_the_labels_and_the_controller_reference() -> None:
    c = cortex()
    for obj in children(c):
        if obj["kind"] == "Secret" and obj["metadata"]["name"].endswith(("-audit-signer",
                                                                          "-master-key")):
            # owned by the Namespace too, so it outlives the cortex (test_settings)
            obj = {**obj, "metadata": {**obj["metadata"],
                                       "ownerReferences": obj["metadata"]["ownerReferences"][:1]}}
        assert_child_metadata(obj, name=obj["metadata"]["name"], component=component_of(obj, c))


def test_names_are_deterministic() -> None:
    assert children(cortex()) == children(cortex())


def test_names_fit_for_the_longest_cortex_name() -> None:
    c = cortex(name="c" * MAX_CORTEX_NAME)
    for obj in children(c):
        name = obj["metadata"]["name"]
        assert len(name) <= 63 and DNS_LABEL.match(name), name
        for value in obj["metadata"]["labels"].values():
            assert len(value) <= 63
    # A CronJob's Jobs are named "<cronjob>-<minutes>" (11 more characters).
    assert len(names.backup_cronjob_name(c.meta.name)) <= 52
    # The StatefulSet's pod and its controller-revision-hash label ("<sts>-<10 chars>").
    sts = names.db_name(c.meta.name)
    assert len(f"{sts}-0") <= 63 and len(f"{sts}-0123456789") <= 63


def test_two_cortexes_share_no_names() -> None:
    ours = {(o["kind"], o["metadata"]["name"]) for o in children(cortex())}
    theirs = {(o["kind"], o["metadata"]["name"]) for o in children(cortex(name="other"))}
    assert not ours & theirs


def test_kinds_of_one_cortex_have_distinct_names() -> None:
    seen = [(o["kind"], o["metadata"]["name"]) for o in children(cortex())]
    assert len(seen) == len(set(seen))


def test_the_name_families_are_those_the_builders_use() -> None:
    c = cortex(name="fam")
    built = {(o["kind"], o["metadata"]["name"]) for o in children(c) if o["kind"] != "Job"}
    declared = {(kind, f"fam{suffix}") for kind, suffixes in names.FAMILIES.items()
                for suffix in suffixes}
    assert built == declared


def test_the_only_pair_of_names_two_cortexes_can_share_is_the_service_one() -> None:
    # Two families of one kind collide exactly when one suffix ends with the other.
    clashes = {(kind, a, b) for kind, suffixes in names.FAMILIES.items()
               for a in suffixes for b in suffixes if a != b and b.endswith(a)}
    assert clashes == {("Service", "", "-db")}
    # ...and cortex "a"'s database Service is cortex "a-db"'s API Service.
    a_db = {(o["kind"], o["metadata"]["name"]) for o in children(cortex(name="a-db"))}
    a = {(o["kind"], o["metadata"]["name"]) for o in children(cortex(name="a"))}
    assert a & a_db == {("Service", "a-db")}


def test_claimants_are_every_cortex_whose_names_include_the_object() -> None:
    assert names.claimants("Service", "a-db") == {"a", "a-db"}
    assert names.claimants("Service", "a") == {"a"}
    assert names.claimants("Secret", "a-db-credentials") == {"a"}
    assert names.claimants("Deployment", "a-db") == set()
    assert names.claimants("Pod", "a-server-0") == set()


def test_container_and_volume_names_of_dotted_names_do_not_collide() -> None:
    dotted, dashed = names.dns_label("key-", "a.b"), names.dns_label("key-", "a-b")
    assert dashed == "key-a-b" and dotted != dashed
    assert DNS_LABEL.match(dotted) and len(dotted) <= 63
