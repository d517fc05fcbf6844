"""The server's ServiceAccount, its TokenReview binding and the PodDisruptionBudget."""

from attested_cortex.builders.access import (
    build_disruption_budget,
    build_service_account,
    build_tokenreview_binding,
    wants_disruption_budget,
)
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.deployments import build_deployment
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, assert_child_metadata, cortex


def test_service_account_is_the_pods() -> None:
    sa = build_service_account(cortex())
    assert sa["kind"] == "ServiceAccount"
    assert_child_metadata(sa, name=f"{CORTEX}-server", component="server")
    pod = build_deployment(cortex(), DEFAULTS, Satellites())["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == sa["metadata"]["name"]


def test_tokenreview_binding_is_owned_by_the_namespace() -> None:
    binding = build_tokenreview_binding(cortex(), DEFAULTS, "ns-uid-1")
    meta = binding["metadata"]
    assert meta["name"] == f"attested-cortex:{NAMESPACE}:{CORTEX}"
    assert "namespace" not in meta  # cluster-scoped
    assert meta["ownerReferences"] == [{"apiVersion": "v1", "kind": "Namespace",
                                        "name": NAMESPACE, "uid": "ns-uid-1"}]
    assert meta["labels"] == {"app.kubernetes.io/name": "attested-cortex",
                              "app.kubernetes.io/instance": CORTEX,
                              "app.kubernetes.io/component": "server",
                              "app.kubernetes.io/managed-by": "attested-cortex-operator",
                              "cortex.attested.dev/namespace": NAMESPACE}
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": DEFAULTS.tokenreview_role}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"{CORTEX}-server",
                                    "namespace": NAMESPACE}]


def test_binding_names_differ_per_namespace_and_cortex() -> None:
    a = build_tokenreview_binding(cortex(), DEFAULTS, "u")["metadata"]["name"]
    b = build_tokenreview_binding(cortex(name="other"), DEFAULTS, "u")["metadata"]["name"]
    assert a != b


def test_disruption_budget_only_with_two_or_more_replicas() -> None:
    assert not wants_disruption_budget(cortex())
    assert not wants_disruption_budget(cortex({"server": {"replicas": 0}}))
    assert wants_disruption_budget(cortex({"server": {"replicas": 2}}))


def test_disruption_budget() -> None:
    pdb = build_disruption_budget(cortex({"server": {"replicas": 3}}))
    assert pdb["apiVersion"] == "policy/v1" and pdb["kind"] == "PodDisruptionBudget"
    assert_child_metadata(pdb, name=f"{CORTEX}-server", component="server")
    assert pdb["spec"]["maxUnavailable"] == 1
    pod = build_deployment(cortex(), DEFAULTS, Satellites())["spec"]["template"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
