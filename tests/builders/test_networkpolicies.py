"""The database NetworkPolicy: only this cortex's server and migration pods get in."""

from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.jobs import build_migration_job
from attested_cortex.builders.networkpolicies import build_db_network_policy
from attested_cortex.builders.statefulsets import build_statefulset
from tests.builders.specs import CORTEX, DEFAULTS, assert_child_metadata, cortex


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return selector.items() <= labels.items()


def test_metadata_labels_and_owner() -> None:
    policy = build_db_network_policy(cortex())
    assert policy["apiVersion"] == "networking.k8s.io/v1" and policy["kind"] == "NetworkPolicy"
    assert_child_metadata(policy, name=f"{CORTEX}-db", component="database")
    assert policy["spec"]["policyTypes"] == ["Ingress"]


def test_applies_to_the_database_pod_only() -> None:
    selector = build_db_network_policy(cortex())["spec"]["podSelector"]["matchLabels"]
    db = build_statefulset(cortex(), DEFAULTS)["spec"]["template"]["metadata"]["labels"]
    server = build_deployment(cortex(), DEFAULTS, Satellites())["spec"]["template"]
    assert matches(selector, db)
    assert not matches(selector, server["metadata"]["labels"])


def test_lets_in_the_server_and_migration_pods_on_5432() -> None:
    (ingress,) = build_db_network_policy(cortex())["spec"]["ingress"]
    assert ingress["ports"] == [{"protocol": "TCP", "port": 5432}]
    peers = [p["podSelector"]["matchLabels"] for p in ingress["from"]]
    assert all(set(p) == {"podSelector"} for p in ingress["from"])  # same namespace only
    server = build_deployment(cortex(), DEFAULTS, Satellites())["spec"]["template"]
    job = build_migration_job(cortex(), DEFAULTS)["spec"]["template"]
    for pod in (server, job):
        assert any(matches(p, pod["metadata"]["labels"]) for p in peers)
    db = build_statefulset(cortex(), DEFAULTS)["spec"]["template"]["metadata"]["labels"]
    assert not any(matches(p, db) for p in peers)


def test_another_cortex_is_not_let_in() -> None:
    (ingress,) = build_db_network_policy(cortex())["spec"]["ingress"]
    other = build_deployment(cortex(name="other"), DEFAULTS, Satellites())["spec"]["template"]
    assert not any(matches(p["podSelector"]["matchLabels"], other["metadata"]["labels"])
                   for p in ingress["from"])
