"""The cortex's one configuration ConfigMap: server settings, hook file and public keyring.

``config.yaml`` is :class:`attested_cortex.server.settings.ServerSettings` (read at start:
a change to it rolls the server through the config hash); ``hooks.yaml`` and the
``keyring-*.json`` files are hot-reloaded by the server, so changing them rolls nothing.
The database URI is never here: it reaches the server from its Secret as an environment
variable; nor is any other secret (the embedding endpoint's key, the audit signer's key):
the settings name the files their Secrets are mounted as. The spec sections that only tune
the server are translated in :mod:`.settings`. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from attested_cortex.builders import certificates, hookfiles, keyrings, names, rules
from attested_cortex.builders import settings as sections
from attested_cortex.builders.inputs import Cortex, Identity, Rule, Subscription
from attested_cortex.builders.services import SERVER_PORT
from attested_cortex.crd.hookchain import Hook
from attested_cortex.crd.memorycortex import EncryptionSpec, TranscriptsSpec

Object = dict[str, Any]

CONFIG_DIR: Final = "/etc/cortex"
CONFIG_FILE: Final = "config.yaml"
HOOKS_FILE: Final = "hooks.yaml"
KEYS_DIR: Final = "/var/run/cortex/keys"
TOKENS_DIR: Final = "/etc/cortex-tokens"
APPROVAL_DIR: Final = "/var/run/cortex/approval"
#: Where each CortexSubscription's signing secret is mounted, as a file named after it.
SUBSCRIPTIONS_DIR: Final = "/var/run/cortex/subscriptions"
MODES: Final = {"Advisory": "advisory", "Enforce": "enforce", "Off": "off"}
WRITE_DEFAULTS: Final = {"Allow": "allow", "Deny": "deny", "AskUser": "ask_user"}


@dataclass(frozen=True)
class Satellites:
    """What the cortex's satellites contribute: identities, hooks in force, rules in force."""

    identities: Sequence[Identity] = ()
    hooks: Sequence[Hook] = ()
    rules: Sequence[Rule] = ()
    #: The cortex's CortexSubscriptions (issue 41, ADR 0108), by name.
    subscriptions: Sequence[Subscription] = ()


def agent_mapping(identities: Iterable[Identity]) -> list[Object]:
    """``--auth kubernetes``: service account -> agent id, scopes and trust tier, from
    serviceAccountRef."""
    mapping = [{"service_account": f"{i.meta.namespace}/{i.spec.service_account_ref.name}",
                "agent_id": keyrings.agent_id(i)}
               | ({"scopes": sorted(i.spec.scopes)} if i.spec.scopes is not None else {})
               | ({"trust_tier": i.spec.trust_tier} if i.spec.trust_tier is not None else {})
               for i in identities if i.spec.service_account_ref is not None]
    return sorted(mapping, key=lambda m: m["service_account"])


def transcripts_settings(spec: TranscriptsSpec) -> Object:
    """``spec.transcripts`` as the server's ``transcripts`` settings."""
    return {"enabled": spec.enabled, "retention_days": spec.retention_days,
            "prune_after_days": spec.prune_after_days, "max_bytes": spec.max_bytes,
            "namespaces": [{"namespace": n.namespace, "retention_days": n.retention_days}
                           for n in spec.namespaces]}


def encryption_settings(spec: EncryptionSpec) -> Object:
    """``spec.encryption`` as the server's ``encryption`` settings: ``at_rest`` only when set
    (unset, the server takes the cortex's own default, kept in its database: ADR 0079);
    sealed namespaces only when some are listed (an existing cortex's configuration, and so
    its pods, stay as they were)."""
    settings: Object = {} if spec.at_rest is None else {"at_rest": spec.at_rest}
    if spec.sealed_namespaces:
        settings["sealed_namespaces"] = list(spec.sealed_namespaces)
    return settings


def server_settings(cortex: Cortex, satellites: Satellites) -> Object:
    """The content of ``config.yaml``."""
    spec = cortex.spec
    auth = "kubernetes" if spec.server.auth.mode == "Kubernetes" else "tokens"
    settings: Object = {
        "listen": [f"0.0.0.0:{SERVER_PORT}"], "auth": auth,
        "graph_backend": spec.graph.backend,
        "hooks_file": f"{CONFIG_DIR}/{HOOKS_FILE}", "keys_dir": KEYS_DIR,
        "permissions": {"mode": MODES[spec.permissions.mode],
                        "write_default": WRITE_DEFAULTS[spec.permissions.write_default],
                        "rules": [rules.compile_rule(r) for r in rules.ordered(satellites.rules)]},
        "agents": agent_mapping(satellites.identities),
        "trust": {"default_tier": spec.trust.default_tier,
                  "ceilings": {tier: dict(sorted(marks.items()))
                               for tier, marks in sorted(spec.trust.ceilings.items())}},
        "approval": sections.approval_settings(spec.approval),
        "transcripts": transcripts_settings(spec.transcripts),
        "quotas": sections.quotas_settings(cortex, satellites.identities),
        "limits": sections.limits_settings(cortex),
        "embedder": sections.embedder(cortex),
        "embedding": sections.embedding_settings(cortex),
        "log_level": spec.server.log_level.upper(),
        "master_key": {"dir": sections.MASTER_KEY_DIR},
        "encryption": encryption_settings(spec.encryption),
        **sections.database_settings(cortex),
    }
    if auth == "tokens":
        settings["tokens_file"] = f"{TOKENS_DIR}/tokens"
    if spec.approval.enabled:
        settings["approval"]["hmac_secret_file"] = f"{APPROVAL_DIR}/hmac"
    signer = sections.audit_signer(cortex)
    if signer is not None:
        settings["audit_signer"] = signer
        settings["audit"] = {"record_reads": spec.audit.record_reads}
        if spec.audit.witnesses:
            settings["audit"]["witnesses"] = [{"name": w.name, "url": w.url}
                                              for w in spec.audit.witnesses]
    if satellites.subscriptions:
        settings["subscriptions"] = {"declared": [
            declared_subscription(s) for s in satellites.subscriptions]}
    spoke = sections.spoke_memory_settings(cortex)
    if spoke is not None:
        settings["spoke_memory"] = spoke
    tls = certificates.server_tls_settings(cortex)
    if tls is not None:
        settings["tls"] = tls
    return settings


def declared_subscription(subscription: Subscription) -> Object:
    """A CortexSubscription as the server's ``subscriptions.declared`` entry; its secret is
    the file :func:`~.deployments` mounts under :data:`SUBSCRIPTIONS_DIR`."""
    spec = subscription.spec
    return {"name": subscription.meta.name, "url": spec.url, "events": list(spec.events),
            "namespaces": list(spec.namespaces), "max_in_flight": spec.max_in_flight,
            "enabled": spec.enabled, "allow_private_targets": spec.allow_private_targets,
            "secret_file": f"{SUBSCRIPTIONS_DIR}/{subscription.meta.name}"}


def _dump(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=True, default_flow_style=False)


def build_config_map(cortex: Cortex, satellites: Satellites) -> Object:
    """The rendered configuration ConfigMap."""
    data = {CONFIG_FILE: _dump(server_settings(cortex, satellites)),
            HOOKS_FILE: _dump(hookfiles.render_hooks_file(satellites.hooks))}
    for name, document in keyrings.keyring_files(satellites.identities).items():
        data[name] = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": names.metadata(names.config_name(cortex.meta.name), cortex.meta,
                                       component="server"),
            "data": data}


def digest(value: object) -> str:
    """A short stable hash of JSON-able data (the config-hash annotation)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
