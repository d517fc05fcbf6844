"""Spec literals and checks shared by the builder tests.

Each factory returns a custom resource parsed from the dict a user would write in YAML (the
camelCase body), so the tests exercise the same parse the controllers use. The checks walk
built objects for properties every child must have: the recommended labels, the owner
reference, and the "restricted" Pod Security Standard on every pod template.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from nacl.signing import SigningKey

from attested_cortex.attest.keys import fingerprint_of
from attested_cortex.builders.inputs import (
    Chain,
    Cortex,
    Defaults,
    Identity,
    Rule,
    parse_chain,
    parse_cortex,
    parse_identity,
    parse_rule,
)

Object = dict[str, Any]

NAMESPACE: Final = "team-a"
CORTEX: Final = "notes"
CORTEX_UID: Final = "0b6e2a1c-5f0e-4d53-9c0c-3b1f2a7d9e10"
DEFAULTS: Final = Defaults(server_image="cortex/server:1.4.0",
                           postgres_image="cortex/postgres-age:17-1.5", schema_version=7)

API_VERSION: Final = "cortex.attested.dev/v1alpha1"
#: Volume types the "restricted" Pod Security Standard allows.
RESTRICTED_VOLUMES: Final = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                       "persistentVolumeClaim", "projected", "secret"})


def merged(base: Mapping[str, Any], extra: Mapping[str, Any]) -> Object:
    """``base`` with ``extra`` merged in recursively (dicts merge, anything else replaces)."""
    out = copy.deepcopy(dict(base))
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def body(kind: str, name: str, spec: Mapping[str, Any], *, status: Mapping[str, Any] | None = None,
         uid: str | None = None, generation: int = 1) -> Object:
    """A watched object as the API server hands it out."""
    document: Object = {"apiVersion": API_VERSION, "kind": kind,
                        "metadata": {"name": name, "namespace": NAMESPACE,
                                     "uid": uid or f"uid-{kind.lower()}-{name}",
                                     "generation": generation},
                        "spec": dict(spec)}
    if status is not None:
        document["status"] = dict(status)
    return document


def cortex(spec: Mapping[str, Any] | None = None, *, name: str = CORTEX) -> Cortex:
    """A MemoryCortex with a managed database unless ``spec`` says otherwise."""
    spec = dict(spec) if spec is not None else {"database": {"managed": {}}}
    spec.setdefault("database", {"managed": {}})
    return parse_cortex(body("MemoryCortex", name, spec, uid=CORTEX_UID))


def external_cortex(extra: Mapping[str, Any] | None = None) -> Cortex:
    """A MemoryCortex using an existing database through the Secret ``shared-pg``/``dsn``."""
    spec = {"database": {"external": {"secretRef": {"name": "shared-pg", "key": "dsn"}}}}
    return cortex(merged(spec, extra or {}))


def rule(name: str, spec: Mapping[str, Any] | None = None) -> Rule:
    """A PermissionRule of the cortex: allow everything in ``team/**`` unless told otherwise."""
    base = {"cortexRef": {"name": CORTEX}, "namespace": "team/**", "agents": ["*"],
            "operations": ["*"], "decision": "Allow"}
    return parse_rule(body("PermissionRule", name, merged(base, spec or {})))


def exec_hook(name: str, **extra: Any) -> Object:
    """An Exec hook on pre_store running ``/hooks/<name>``."""
    return {"name": name, "events": ["pre_store"], "mode": "Exec",
            "command": [f"/hooks/{name}", "--strict"], **extra}


def daemon_hook(name: str, **extra: Any) -> Object:
    """A Daemon hook on post_recall served by a sidecar image."""
    return {"name": name, "events": ["post_recall"], "mode": "Daemon",
            "sidecar": {"image": f"registry.example/hooks/{name}:1"}, **extra}


def chain(name: str, hooks: list[Object], *, accepted: list[Object] | None = None) -> Chain:
    """A HookChain of the cortex; ``accepted`` is its status.acceptedHooks."""
    status = {"acceptedHooks": accepted} if accepted is not None else None
    return parse_chain(body("HookChain", name, {"cortexRef": {"name": CORTEX}, "hooks": hooks},
                            status=status))


def public_key(seed: int) -> tuple[str, str]:
    """A real Ed25519 public key (base64) and its fingerprint, from a one-byte seed."""
    raw = bytes(SigningKey(bytes([seed]) * 32).verify_key)
    return base64.b64encode(raw).decode(), fingerprint_of(raw)


def identity(name: str, *, custody: str = "Cortex", revision: int = 1,
             service_account: str | None = None, agent_id: str | None = None,
             retired: list[datetime] | None = None, secret_name: str | None = "",
             spec: Mapping[str, Any] | None = None) -> Identity:
    """An AgentIdentity whose key is at ``revision``; ``retired[i]`` retired revision i+1.

    ``secret_name=""`` means the operator's usual ``<name>-agent-key`` (Cortex custody only);
    None leaves status.secretName unset.
    """
    base: Object = {"cortexRef": {"name": CORTEX}, "keyCustody": custody}
    if service_account:
        base["serviceAccountRef"] = {"name": service_account}
    if agent_id:
        base["agentId"] = agent_id
    key, fingerprint = public_key(revision)
    status: Object = {"publicKey": key, "fingerprint": fingerprint, "keyRevision": revision}
    if secret_name == "" and custody == "Cortex":
        status["secretName"] = f"{name}-agent-key"
    elif secret_name:
        status["secretName"] = secret_name
    previous = []
    for index, when in enumerate(retired or [], start=1):
        old_key, old_fingerprint = public_key(index)
        previous.append({"keyRevision": index, "publicKey": old_key,
                         "fingerprint": old_fingerprint, "retiredAt": when.isoformat()})
    if previous:
        status["previousKeys"] = list(reversed(previous))  # status lists newest first
    return parse_identity(body("AgentIdentity", name, merged(base, spec or {}), status=status))


def assert_child_metadata(obj: Mapping[str, Any], *, name: str, component: str,
                          cortex_name: str = CORTEX) -> None:
    """Name, namespace, the four recommended labels and the MemoryCortex controller ref."""
    meta = obj["metadata"]
    assert meta["name"] == name
    assert meta["namespace"] == NAMESPACE
    assert meta["labels"] == {"app.kubernetes.io/name": "attested-cortex",
                              "app.kubernetes.io/instance": cortex_name,
                              "app.kubernetes.io/component": component,
                              "app.kubernetes.io/managed-by": "attested-cortex-operator"}
    assert meta["ownerReferences"] == [{"apiVersion": API_VERSION, "kind": "MemoryCortex",
                                        "name": cortex_name, "uid": CORTEX_UID,
                                        "controller": True, "blockOwnerDeletion": True}]


def containers_of(template: Mapping[str, Any]) -> list[Object]:
    """Every container of a pod template: init, regular and ephemeral."""
    spec = template["spec"]
    return [*spec.get("initContainers", []), *spec["containers"],
            *spec.get("ephemeralContainers", [])]


def assert_restricted(template: Mapping[str, Any]) -> None:
    """The pod template passes the "restricted" Pod Security Standard (v1.30 rules).

    Pod level: no host namespaces or ports, only restricted volume types. Every container:
    not privileged, no privilege escalation, all capabilities dropped (none added), a
    read-only root filesystem, non-root (own or inherited), seccomp RuntimeDefault or
    Localhost (own or inherited), never uid 0.
    """
    spec = template["spec"]
    pod = spec.get("securityContext", {})
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert spec.get(host) in (None, False), host
    assert pod.get("runAsNonRoot") is True
    assert pod.get("runAsUser", 1) != 0
    assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault"
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        assert kinds <= RESTRICTED_VOLUMES, (volume["name"], kinds)
    containers = containers_of(template)
    assert containers
    for container in containers:
        who = container["name"]
        sc = container.get("securityContext", {})
        assert sc.get("privileged") in (None, False), who
        assert sc.get("allowPrivilegeEscalation") is False, who
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], who
        assert set(sc.get("capabilities", {}).get("add", [])) <= {"NET_BIND_SERVICE"}, who
        assert sc.get("readOnlyRootFilesystem") is True, who
        assert sc.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, who
        assert sc.get("runAsUser", pod.get("runAsUser", 1)) != 0, who
        seccomp = sc.get("seccompProfile", pod.get("seccompProfile", {}))
        assert seccomp.get("type") in ("RuntimeDefault", "Localhost"), who
        for port in container.get("ports", []):
            assert "hostPort" not in port, who


def env_of(container: Mapping[str, Any]) -> dict[str, Object]:
    """A container's environment by variable name (each name at most once)."""
    names = [e["name"] for e in container.get("env", [])]
    assert len(names) == len(set(names)), names
    return {e["name"]: e for e in container.get("env", [])}


def container(template: Mapping[str, Any], name: str) -> Object:
    """The container called ``name``."""
    found = [c for c in containers_of(template) if c["name"] == name]
    assert len(found) == 1, [c["name"] for c in containers_of(template)]
    return found[0]
