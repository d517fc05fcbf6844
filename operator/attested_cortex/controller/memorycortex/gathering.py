"""Everything a cortex's objects are built from, read once from the watched views."""

from __future__ import annotations

from attested_cortex.builders import hookfiles, keyrings, rules
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.builders.inputs import (
    Cortex,
    InvalidSpecError,
    parse_chain,
    parse_identity,
    parse_rule,
    parse_subscription,
)
from attested_cortex.controller.runtime import Views


def gather(views: Views, cortex: Cortex) -> Satellites:
    """Identities with a key (one per agent id), the hooks in force, the rules that
    compile and the subscriptions (issue 41)."""
    ns, name = cortex.meta.namespace, cortex.meta.name
    identities, chains, accepted = [], [], []
    for body in views.of_cortex("AgentIdentity", ns, name):
        try:
            identities.append(parse_identity(body))
        except InvalidSpecError:
            continue  # its own controller reports it
    for body in views.of_cortex("HookChain", ns, name):
        try:
            chains.append(parse_chain(body))
        except InvalidSpecError:
            continue
    for body in views.of_cortex("PermissionRule", ns, name):
        try:
            rule = parse_rule(body)
        except InvalidSpecError:
            continue
        if rules.validate_rule(rule, cortex) is None:
            accepted.append(rule)
    subscriptions = []
    for body in views.of_cortex("CortexSubscription", ns, name):
        try:
            subscriptions.append(parse_subscription(body))
        except InvalidSpecError:
            continue
    keyed = [i for i in keyrings.admitted(identities) if i.status.public_key]
    return Satellites(identities=tuple(sorted(keyed, key=lambda i: i.meta.name)),
                      hooks=tuple(hookfiles.hooks_in_force(chains)),
                      rules=tuple(rules.ordered(accepted)),
                      subscriptions=tuple(sorted(subscriptions, key=lambda s: s.meta.name)))
