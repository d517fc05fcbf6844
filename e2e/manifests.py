"""The resources the end-to-end flows apply: a MemoryCortex with a managed database and a
trust ceiling of its own (Untrusted may read team/ops only), three AgentIdentities (custody
Cortex and Agent, and an Untrusted scout) with their ServiceAccounts, a HookChain with one
Exec hook (denies content marked DENY-ME) and one Daemon hook (the auto-link sidecar), and
PermissionRules in Enforce mode. Close to examples/cortex/; every name differs from the
examples' (``make e2e`` applies both into the release namespace). Pure."""

from __future__ import annotations

import json
from typing import Any, Final

CORTEX: Final = "e2e-memory"
PLANNER: Final = "e2e-planner"        # custody Cortex: the server signs for it
RESEARCHER: Final = "e2e-researcher"  # custody Agent: holds its own key
SCOUT: Final = "e2e-scout"            # trustTier Untrusted, capped by the cortex's ceiling
#: The cortex's spec.trust.ceilings mark for Untrusted memory.read (the default, qualified to
#: public/**, would refuse the scout everything it holds).
SCOUT_CEILING: Final = "qualified:team/ops/**"
DENY_MARK: Final = "DENY-ME"
GROUP: Final = "cortex.attested.dev/v1alpha1"
SERVER_IMAGE: Final = "attested-cortex/cortex:0.1.0"  # built by hack/images/build.sh

# An Exec hook as a one-line program (the protocol of examples/hooks/minimal_hook.py).
DENY_HOOK: Final = (
    "import json,sys; r=json.load(sys.stdin); "
    f"d='{DENY_MARK}' in str(r['payload'].get('content','')); "
    "json.dump({'decision':'deny','reason':'marked','code':'marked'} if d "
    "else {'decision':'allow'}, sys.stdout)")


def resources(namespace: str) -> list[dict[str, Any]]:
    """Everything the flows apply, in one list."""
    meta = {"namespace": namespace}
    ref = {"cortexRef": {"name": CORTEX}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "name": PLANNER}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {**meta, "name": RESEARCHER}},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {**meta, "name": SCOUT}},
        {"apiVersion": GROUP, "kind": "MemoryCortex", "metadata": {**meta, "name": CORTEX},
         "spec": {"database": {"managed": {"storage": {"size": "1Gi"}}},
                  "server": {"replicas": 1, "auth": {"mode": "Kubernetes"}},
                  "permissions": {"mode": "Enforce"},
                  "trust": {"ceilings": {"Untrusted": {"memory.read": SCOUT_CEILING}}}}},
        {"apiVersion": GROUP, "kind": "AgentIdentity", "metadata": {**meta, "name": PLANNER},
         "spec": {**ref, "keyCustody": "Cortex", "serviceAccountRef": {"name": PLANNER}}},
        {"apiVersion": GROUP, "kind": "AgentIdentity",
         "metadata": {**meta, "name": RESEARCHER},
         "spec": {**ref, "keyCustody": "Agent", "serviceAccountRef": {"name": RESEARCHER}}},
        {"apiVersion": GROUP, "kind": "AgentIdentity", "metadata": {**meta, "name": SCOUT},
         "spec": {**ref, "serviceAccountRef": {"name": SCOUT}, "trustTier": "Untrusted",
                  "scopes": ["memory.read:team/ops/**", "memory.read:team/plans/**"]}},
        {"apiVersion": GROUP, "kind": "HookChain", "metadata": {**meta, "name": "e2e-guard"},
         "spec": {**ref, "hooks": [
             {"name": "deny-marked", "events": ["pre_store"], "mode": "Exec",
              "command": ["python3", "-c", DENY_HOOK], "timeoutMs": 3000,
              "failMode": "Closed"},
             {"name": "auto-link", "events": ["post_store"], "mode": "Daemon",
              "timeoutMs": 500, "sidecar": {
                  "image": SERVER_IMAGE,
                  "command": ["cortexctl", "hookd", "--listen",
                              "unix:///var/run/cortex/hooks/auto-link.sock", "--",
                              "python3", "-m", "attested_cortex.hooks.reference.autolink"]}},
         ]}},
        {"apiVersion": GROUP, "kind": "PermissionRule",
         "metadata": {**meta, "name": "e2e-no-secrets"},
         "spec": {**ref, "namespace": "secrets/**", "agents": ["*"], "operations": ["*"],
                  "decision": "Deny", "priority": 100, "reason": "no secrets in memory"}},
        {"apiVersion": GROUP, "kind": "PermissionRule",
         "metadata": {**meta, "name": "e2e-team-shares"},
         "spec": {**ref, "namespace": "team/**", "agents": ["*"],
                  "operations": ["store", "update", "recall", "search", "link", "kg_query",
                                 "kg_paths"], "decision": "Allow"}},
    ]


def as_input(objects: list[dict[str, Any]]) -> str:
    """A kubectl apply -f - input (a List)."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
