"""The AgentIdentity's refusals, checked before any key work: an agent id or ServiceAccount
an earlier identity of the same cortex holds (``DuplicateAgentId``,
``DuplicateServiceAccount``: no key is minted, none trusted), and a key Secret that no longer
holds the key status recorded (``KeyMismatch``: a hand edit; the recorded key stays in
status and in the cortex's keyring, and nothing rotates, until the Secret holds it again).
Called by :mod:`.reconciling`; ADR 0023.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders.inputs import Identity, InvalidSpecError, parse_identity
from attested_cortex.builders.keyrings import rival_of
from attested_cortex.controller.agentidentity import rotating
from attested_cortex.controller.agentidentity.keys import read_public
from attested_cortex.controller.runtime import Runtime

KIND: Final = "AgentIdentity"
Object = dict[str, Any]


class DuplicateAgentIdError(RuntimeError):
    """Another identity of the cortex, created first, holds this agent id."""


class DuplicateServiceAccountError(RuntimeError):
    """Another identity of the cortex, created first, maps this ServiceAccount."""


class KeyMismatchError(RuntimeError):
    """The key Secret holds another key than the one status recorded (a hand edit)."""


def check_unique(rt: Runtime, identity: Identity) -> None:
    """Refuse an agent id or a ServiceAccount an earlier identity of the cortex holds."""
    ns, cortex = identity.meta.namespace, identity.spec.cortex_ref.name
    others = []
    for body in rt.views.of_cortex(KIND, ns, cortex):
        try:
            others.append(parse_identity(body))
        except InvalidSpecError:
            continue  # its own pass reports it
    rival = rival_of(identity, others)
    if rival is None:
        return
    holder, claim = rival
    error = DuplicateAgentIdError if claim.startswith("agent id") else \
        DuplicateServiceAccountError
    raise error(f"{claim} is held by AgentIdentity {holder.meta.name} (created first) for "
                f"cortex {cortex}; this identity is not trusted and gets no key: change it "
                "or delete one of them")


def _is_rotation_of(secret: Object, revision: int, fingerprint: str) -> bool:
    """The Secret holds the next revision, rotated by the operator out of the recorded one."""
    notes = secret["metadata"].get("annotations") or {}
    return (rotating.revision_of(secret) == revision + 1
            and notes.get(rotating.PREVIOUS_REVISION) == str(revision)
            and notes.get(rotating.PREVIOUS_FINGERPRINT) == fingerprint)


def check_recorded(identity: Identity, secret: Object) -> None:
    """Refuse a key Secret that no longer holds the key status recorded."""
    recorded, revision = identity.status.fingerprint, identity.status.key_revision
    if not recorded or not revision:
        return  # nothing recorded yet: the first pass records what the Secret holds
    held = read_public(secret)
    if (rotating.revision_of(secret), held.fingerprint) == (revision, recorded) or \
            _is_rotation_of(secret, revision, recorded):
        return
    raise KeyMismatchError(
        f"Secret {secret['metadata']['name']} holds key {held.fingerprint} (revision "
        f"{rotating.revision_of(secret)}), not the recorded key {recorded} (revision "
        f"{revision}); the recorded key stays trusted and nothing rotates: restore the "
        "Secret's files, or delete and recreate the AgentIdentity")
