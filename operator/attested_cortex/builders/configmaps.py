"""The cortex's one configuration ConfigMap: server settings, hook file and public keyring.

``config.yaml`` is :class:`attested_cortex.server.settings.ServerSettings` (read at start:
a change to it rolls the server through the config hash); ``hooks.yaml`` and the
``keyring-*.json`` files are hot-reloaded by the server, so changing them rolls nothing.
The database URI is never here: it reaches the server from its Secret as an environment
variable; nor is any other secret (the embedding endpoint's key, the audit signer's key):
the settings name the files their Secrets are mounted as. Each spec section is translated
by one function of :mod:`.settings`; :func:`server_settings` only puts them together. Pure.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import yaml

from attested_cortex.builders import hookfiles, keyrings, names, witnesses
from attested_cortex.builders import settings as sections
from attested_cortex.builders.inputs import Cortex, Identity, Rule, Subscription
from attested_cortex.builders.services import SERVER_PORT
from attested_cortex.crd.hookchain import Hook

Object = dict[str, Any]

CONFIG_DIR: Final = "/etc/cortex"
CONFIG_FILE: Final = "config.yaml"
HOOKS_FILE: Final = "hooks.yaml"
KEYS_DIR: Final = "/var/run/cortex/keys"
#: Where each CortexSubscription's signing secret is mounted, as a file named after it.
SUBSCRIPTIONS_DIR: Final = "/var/run/cortex/subscriptions"


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


def server_settings(cortex: Cortex, satellites: Satellites) -> Object:
    """The content of ``config.yaml``: the pod's own paths, then one section per spec section
    (each whole in :mod:`.settings`)."""
    spec = cortex.spec
    return {
        "listen": [f"0.0.0.0:{SERVER_PORT}"], "hooks_file": f"{CONFIG_DIR}/{HOOKS_FILE}",
        "keys_dir": KEYS_DIR, "graph_backend": spec.graph.backend,
        "log_level": spec.server.log_level.upper(),
        "agents": sorted([*agent_mapping(satellites.identities), *witnesses.agent_mapping(cortex)],
                         key=lambda m: m["service_account"]),
        **sections.auth_settings(cortex),
        **sections.permissions_settings(cortex, satellites.rules),
        **sections.trust_settings(cortex),
        **sections.approval_settings(cortex),
        **sections.transcripts_settings(cortex),
        **sections.quotas_settings(cortex, satellites.identities),
        **sections.limits_settings(cortex),
        **sections.embedding_settings(cortex),
        **sections.encryption_settings(cortex),
        **sections.database_settings(cortex),
        **sections.audit_settings(cortex),
        **sections.spoke_memory_settings(cortex),
        **sections.tls_settings(cortex),
        **sections.federation_settings(cortex),
        **subscriptions_settings(satellites.subscriptions),
    }


def subscriptions_settings(subscriptions: Sequence[Subscription]) -> Object:
    """The cortex's CortexSubscriptions as ``subscriptions.declared``; nothing without any."""
    if not subscriptions:
        return {}
    return {"subscriptions": {"declared": [declared_subscription(s) for s in subscriptions]}}


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
