"""Who the server pods are: their ServiceAccount, the TokenReview binding, and the
PodDisruptionBudget that keeps one of several replicas up. Pure.

The binding is cluster-scoped (TokenReview is), so it cannot be owned by the namespaced
MemoryCortex: it is owned by the cortex's Namespace instead (deleting the namespace removes
it, with or without the operator) and the operator deletes it when the cortex goes.
"""

from __future__ import annotations

from typing import Any

from attested_cortex.builders import names
from attested_cortex.builders.inputs import Cortex, Defaults

Object = dict[str, Any]


def build_service_account(cortex: Cortex) -> Object:
    """The server pods' ServiceAccount."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": names.metadata(names.server_name(cortex.meta.name), cortex.meta,
                                       component="server")}


def build_tokenreview_binding(cortex: Cortex, defaults: Defaults, namespace_uid: str) -> Object:
    """ClusterRoleBinding of the chart's TokenReview role to the server's ServiceAccount."""
    ns, name = cortex.meta.namespace, cortex.meta.name
    labels = {**names.labels(name, "server"), names.NAMESPACE_LABEL: ns}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": names.tokenreview_binding_name(ns, name), "labels": labels,
                         "ownerReferences": [names.namespace_owner(ns, namespace_uid)]},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": defaults.tokenreview_role},
            "subjects": [{"kind": "ServiceAccount", "name": names.server_name(name),
                          "namespace": ns}]}


def wants_disruption_budget(cortex: Cortex) -> bool:
    """A budget only makes sense with two or more replicas (with one it blocks drains)."""
    return cortex.spec.server.replicas >= 2


def build_disruption_budget(cortex: Cortex) -> Object:
    """At most one server pod voluntarily down at a time."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": names.metadata(names.server_name(cortex.meta.name), cortex.meta,
                                       component="server"),
            "spec": {"maxUnavailable": 1,
                     "selector": {"matchLabels": names.selector(cortex.meta.name, "server")}}}
