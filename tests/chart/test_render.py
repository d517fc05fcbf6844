"""The chart lints, refuses bad values, and renders what the operator needs (no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hack.support.chart import CHART

from attested_cortex.crd import GROUP, KINDS, build_crd
from tests.chart.conftest import by_kind, helm, permissions, render

#: helm, kstatus and promtool are binaries built by `make deps`: not in `make test-fast`.
pytestmark = pytest.mark.tools

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["operator.watchAllNamespaces=true"],
        ["metrics.podMonitor.enabled=true", "crds.create=false"],
    ],
)
def test_helm_lint_passes(sets: list[str]) -> None:
    flags = [arg for value in sets for arg in ("--set", value)]
    result = helm("lint", "--strict", str(CHART), *flags)
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("operator.replicas=2", "additional properties 'replicas' not allowed"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy': value must be one of"),
        ("metrics.port=70000", "at '/metrics/port'"),
        ("operator.logLevel=loud", "at '/operator/logLevel'"),
    ],
)
def test_values_schema_rejects_bad_values(value: str, message: str) -> None:
    result = helm("template", "rel", str(CHART), "--set", value, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_default_render_is_namespaced_and_single_replica() -> None:
    objects = render()
    kinds = sorted(obj["kind"] for obj in objects)
    assert kinds == sorted(
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "ClusterRole",  # the operator's cluster-scoped needs (clusterAlways)
            "ClusterRoleBinding",
            "ClusterRole",  # the TokenReview role it binds to each cortex's server
            "ValidatingAdmissionPolicy",  # its ClusterRoleBinding writes: its own only
            "ValidatingAdmissionPolicyBinding",
            "Deployment",
            "Service",
            *["CustomResourceDefinition"] * 5,
        ]
    )
    deployment = by_kind(objects, "Deployment")[0]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["cortexctl"]
    assert container["args"][:2] == ["operator", "--namespace=cortex-system"]
    assert {"livenessProbe", "readinessProbe", "resources"} <= set(container)


def test_role_grants_exactly_the_permissions_file() -> None:
    role = by_kind(render(), "Role")[0]
    assert role["rules"] == permissions()["namespaced"]
    roles = {r["metadata"]["name"]: r for r in by_kind(
        render("operator.watchAllNamespaces=true"), "ClusterRole")}
    assert roles["rel-attested-cortex-operator"]["rules"] == (
        permissions()["namespaced"] + permissions()["cluster"])
    always = roles["rel-attested-cortex-operator-cluster"]["rules"]
    assert always == [{**rule, "resourceNames": ["rel-attested-cortex-tokenreviewer"]}
                      if rule.get("resourceNames") else rule
                      for rule in permissions()["clusterAlways"]]
    assert roles["rel-attested-cortex-tokenreviewer"]["rules"] == [{
        "apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
        "verbs": ["create"]}]


def test_every_kind_of_ours_is_granted_without_an_rbac_edit() -> None:
    """The custom-resource rules come from the generated CRDs (crd/kinds.KINDS), not from a
    list written again in the permissions file."""
    granted = {(resource, verb) for rule in by_kind(render(), "Role")[0]["rules"]
               if rule["apiGroups"] == [GROUP] for resource in rule["resources"]
               for verb in rule["verbs"]}
    for kind in KINDS:
        assert {(kind.plural, "watch"), (kind.plural, "patch"),
                (f"{kind.plural}/status", "patch"), (f"{kind.plural}/finalizers", "update")
                } <= granted, kind.kind
    assert {resource for resource, _ in granted} == {
        f"{kind.plural}{sub}" for kind in KINDS for sub in ("", "/status", "/finalizers")}


def test_no_rule_uses_a_wildcard() -> None:
    for rules in permissions().values():
        for rule in rules:
            for key in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[key], rule


def test_watch_all_namespaces_uses_cluster_roles() -> None:
    objects = render("operator.watchAllNamespaces=true")
    assert by_kind(objects, "Role") == [] and by_kind(objects, "RoleBinding") == []
    binding = by_kind(objects, "ClusterRoleBinding")[0]
    assert binding["subjects"][0]["namespace"] == "cortex-system"
    container = by_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    assert "--all-namespaces" in container["args"]


def test_crds_are_the_generated_ones_and_kept() -> None:
    crds = {crd["metadata"]["name"]: crd for crd in by_kind(render(), "CustomResourceDefinition")}
    assert set(crds) == {kind.crd_name for kind in KINDS}
    for kind in KINDS:
        rendered = crds[kind.crd_name]
        assert rendered["spec"] == build_crd(kind)["spec"]
        assert rendered["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert by_kind(render("crds.create=false"), "CustomResourceDefinition") == []


def test_containers_meet_the_restricted_pod_security_standard() -> None:
    pod = by_kind(render(), "Deployment")[0]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    context = pod["containers"][0]["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context["readOnlyRootFilesystem"] is True


def test_pod_monitor_is_optional() -> None:
    assert by_kind(render(), "PodMonitor") == []
    assert by_kind(render("metrics.podMonitor.enabled=true"), "PodMonitor") == []  # no CRD
    monitor = by_kind(render("metrics.podMonitor.enabled=true",
                             api_versions=["monitoring.coreos.com/v1/PodMonitor"]),
                      "PodMonitor")[0]
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
