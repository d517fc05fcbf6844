"""The operator's ServiceAccount can do everything in files/operator-permissions.yaml and
nothing else: every needed verb is allowed, a list of dangerous ones is denied, and the
full rule list the API server reports for it holds no extra resource permission.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from hack.support.chart import Release, install
from hack.support.kube import Kube

from tests.chart.conftest import permissions
from tests.support import certmanagercrd, cnpgcrd

pytestmark = pytest.mark.kube

#: Permissions every authenticated identity holds (system:basic-user and friends).
BASELINE = {
    "selfsubjectreviews.authentication.k8s.io",
    "selfsubjectaccessreviews.authorization.k8s.io",
    "selfsubjectrulesreviews.authorization.k8s.io",
}

#: (verb, resource, extra kubectl flags): what the operator must never be able to do.
FORBIDDEN = [
    ("delete", "nodes", []),
    ("bind", "clusterroles.rbac.authorization.k8s.io/cluster-admin", []),
    ("bind", "clusterroles.rbac.authorization.k8s.io/admin", []),
    ("update", "clusterrolebindings.rbac.authorization.k8s.io", []),
    ("escalate", "roles.rbac.authorization.k8s.io", []),
    ("create", "roles.rbac.authorization.k8s.io", []),
    ("impersonate", "users", []),
    ("impersonate", "serviceaccounts", []),
    ("create", "pods", ["--subresource=exec"]),
    ("get", "pods", ["--subresource=log"]),
    ("delete", "pods", []),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", []),
    ("delete", "memorycortexes.cortex.attested.dev", []),
    ("create", "agentidentities.cortex.attested.dev", []),
    ("update", "persistentvolumeclaims", []),
    ("create", "serviceaccounts", ["--subresource=token"]),
    ("update", "jobs.batch", []),
    ("*", "*", []),
    # CloudNativePG: Clusters are applied, never deleted (their cortex's owner reference
    # does that); Backups are only listed (the ScheduledBackup makes them); none of its
    # other kinds is touched.
    ("delete", "clusters.postgresql.cnpg.io", []),
    ("update", "clusters.postgresql.cnpg.io", []),
    # cert-manager: the Certificate is applied and deleted, never updated (ADR 0047).
    ("update", "certificates.cert-manager.io", []),
    ("patch", "clusters.postgresql.cnpg.io", ["--subresource=status"]),
    ("create", "backups.postgresql.cnpg.io", []),
    ("get", "poolers.postgresql.cnpg.io", []),
    ("create", "databases.postgresql.cnpg.io", []),
    ("delete", "backups.postgresql.cnpg.io", []),
    ("update", "scheduledbackups.postgresql.cnpg.io", []),
    ("get", "imagecatalogs.postgresql.cnpg.io", []),
]


def needed(section: str = "namespaced") -> Iterator[tuple[str, str, list[str]]]:
    """Every (verb, resource, flags) a section of the permissions file grants."""
    for rule in permissions()[section]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                qualified = f"{name}.{group}" if group else name
                flags = [f"--subresource={sub}"] if sub else []
                for verb in rule["verbs"]:
                    for named in rule.get("resourceNames") or [None]:
                        yield verb, qualified + (f"/{named}" if named else ""), flags


def can(release: Release, verb: str, resource: str, *flags: str) -> bool:
    result = release.kube.kubectl(
        "auth", "can-i", verb, resource, *flags, f"--as={release.user}", check=False
    )
    return result.stdout.strip() == "yes"


@pytest.fixture(scope="module", autouse=True)
def cloudnativepg_kinds(kube: Kube) -> None:
    """CloudNativePG's CRDs and cert-manager's Certificate CRD (only them): ``kubectl auth
    can-i`` needs discovery to read ``clusters.postgresql.cnpg.io`` and
    ``certificates.cert-manager.io`` as resource and group, so without them a "no" would
    prove nothing."""
    cnpgcrd.install(kube, *cnpgcrd.all_crds(), certmanagercrd.certificate_crd())


@pytest.fixture(scope="module")
def namespaced(kube: Kube) -> Iterator[Release]:
    namespace = f"rbac-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", namespace)
    yield install(kube, "op", namespace)
    kube.helm("uninstall", "op", "-n", namespace, check=False)
    kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(scope="module")
def clusterwide(kube: Kube) -> Iterator[Release]:
    namespace = f"rbac-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", namespace)
    yield install(kube, "cw", namespace, "operator.watchAllNamespaces=true")
    kube.helm("uninstall", "cw", "-n", namespace, check=False)
    kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_operator_can_do_everything_it_needs_in_its_namespace(namespaced: Release) -> None:
    missing = [
        (verb, res, flags)
        for verb, res, flags in needed()
        if not can(namespaced, verb, res, "-n", namespaced.namespace, *flags)
    ]
    assert missing == []


def test_operator_can_bind_only_its_tokenreview_role(namespaced: Release) -> None:
    role = f"clusterroles.rbac.authorization.k8s.io/{namespaced.name}-attested-cortex-tokenreviewer"
    granted_rules = [(v, r.replace("TOKENREVIEWER", role.rpartition("/")[2]), f)
                     for v, r, f in needed("clusterAlways")]
    assert [rule for rule in granted_rules if not can(namespaced, rule[0], rule[1])] == []
    assert can(namespaced, "bind", role)
    assert not can(namespaced, "bind", "clusterroles.rbac.authorization.k8s.io/other")


def test_namespaced_operator_has_no_reach_outside_its_namespace(namespaced: Release) -> None:
    assert not can(namespaced, "get", "secrets", "-n", "kube-system")
    assert not can(namespaced, "list", "secrets", "--all-namespaces")
    assert not can(namespaced, "list", "memorycortexes.cortex.attested.dev", "--all-namespaces")
    assert not can(namespaced, "list", "customresourcedefinitions.apiextensions.k8s.io")


@pytest.mark.parametrize(
    ("verb", "resource", "flags"), FORBIDDEN, ids=[f"{v}-{r}{''.join(f)}" for v, r, f in FORBIDDEN]
)
def test_operator_cannot_do_dangerous_things(
    namespaced: Release, clusterwide: Release, verb: str, resource: str, flags: list[str]
) -> None:
    for release in (namespaced, clusterwide):
        assert not can(release, verb, resource, "-n", release.namespace, *flags)
        assert not can(release, verb, resource, "--all-namespaces", *flags)


def granted(release: Release, namespace: str) -> set[tuple[str, str]]:
    """(resource, verb) pairs the API server reports for the operator in ``namespace``."""
    out = release.kube.kubectl(
        "auth", "can-i", "--list", "-n", namespace, f"--as={release.user}"
    ).stdout
    pairs = set()
    for line in out.splitlines()[1:]:
        resource = line.split()[0]
        if resource.startswith("["):  # a non-resource URL row
            continue
        verbs = line[line.rindex("[") + 1 : line.rindex("]")].split()
        pairs.update((resource, verb) for verb in verbs)
    return pairs


def listed_name(resource: str, group: str) -> str:
    """How ``kubectl auth can-i --list`` names a resource: ``name.group/subresource``."""
    name, _, sub = resource.partition("/")
    qualified = f"{name}.{group}" if group else name
    return f"{qualified}/{sub}" if sub else qualified


def expected(sections: tuple[str, ...]) -> set[tuple[str, str]]:
    pairs = set()
    for section in sections:
        for rule in permissions()[section]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    pairs.update((listed_name(resource, group), verb) for verb in rule["verbs"])
    return pairs


def test_reported_rules_are_exactly_the_permissions_file(
    namespaced: Release, clusterwide: Release
) -> None:
    extra = {pair for pair in granted(namespaced, namespaced.namespace) if pair[0] not in BASELINE}
    assert extra == expected(("namespaced", "clusterAlways"))
    outside = {p for p in granted(namespaced, "default") if p[0] not in BASELINE}
    assert outside == expected(("clusterAlways",))
    extra = {pair for pair in granted(clusterwide, "default") if pair[0] not in BASELINE}
    assert extra == expected(("namespaced", "cluster", "clusterAlways"))


def test_clusterwide_operator_reaches_every_namespace(clusterwide: Release) -> None:
    assert can(clusterwide, "list", "memorycortexes.cortex.attested.dev", "--all-namespaces")
    assert can(clusterwide, "watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can(clusterwide, "delete", "customresourcedefinitions.apiextensions.k8s.io")


def _binding(name: str) -> str:
    return json.dumps({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": name}, "roleRef": {
                           "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": "view"}, "subjects": []})


def test_operator_cannot_delete_bindings_it_does_not_own(namespaced: Release,
                                                         clusterwide: Release) -> None:
    # Found with kubectl (issue 21, item 6): RBAC let the operator delete cluster-admin.
    kube = namespaced.kube
    for release in (namespaced, clusterwide):
        refused = kube.impersonate_kubectl(release.user, "delete", "clusterrolebinding",
                                           "cluster-admin", "--dry-run=server", check=False)
        assert refused.returncode != 0, refused.stdout
        assert "may write only its own ClusterRoleBindings" in refused.stderr
        assert "not cluster-admin" in refused.stderr
    other = f"attested-cortex:{namespaced.namespace}x:someone"  # another namespace's binding
    kube.kubectl("create", "-f", "-", input=_binding(other))
    try:
        refused = kube.impersonate_kubectl(namespaced.user, "delete", "clusterrolebinding", other,
                                           "--dry-run=server", check=False)
        assert refused.returncode != 0 and "may write only its own" in refused.stderr
        allowed = kube.impersonate_kubectl(clusterwide.user, "delete", "clusterrolebinding",
                                           other, "--dry-run=server", check=False)
        assert allowed.returncode == 0, allowed.stderr
    finally:
        kube.kubectl("delete", "clusterrolebinding", other, check=False)
