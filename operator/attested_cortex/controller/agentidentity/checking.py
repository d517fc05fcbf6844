"""The AgentIdentity's refusals, checked before any key work: an agent id or ServiceAccount
an earlier identity of the same cortex holds (``DuplicateAgentId``,
``DuplicateServiceAccount``: no key is minted, none trusted; ``DuplicateKey`` for a Secret
placed by hand with another identity's key), and a key Secret that no longer
holds the key status recorded (``KeyMismatch``: a hand edit; the recorded key stays in
status and in the cortex's keyring, and nothing rotates, until the Secret holds it again).
Called by :mod:`.reconciling`; ADR 0021.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.builders.inputs import Identity, InvalidSpecError, parse_identity
from attested_cortex.builders.keyrings import key_holder_of, rival_of
from attested_cortex.controller.agentidentity import rotating
from attested_cortex.controller.agentidentity.keys import read_public
from attested_cortex.controller.runtime import Runtime

KIND: Final = "AgentIdentity"
Object = dict[str, Any]


class DuplicateAgentIdError(RuntimeError):
    """Another identity of the cortex, created first, holds this agent id."""


class DuplicateServiceAccountError(RuntimeError):
    """Another identity of the cortex, created first, maps this ServiceAccount."""


class DuplicateKeyError(RuntimeError):
    """Another identity of the cortex, created first, holds this key (a copied Secret)."""


class KeyMismatchError(RuntimeError):
    """The key Secret holds another key than the one status recorded (a hand edit)."""


def _others(rt: Runtime, identity: Identity) -> list[Identity]:
    others = []
    for body in rt.views.of_cortex(KIND, identity.meta.namespace, identity.spec.cortex_ref.name):
        try:
            others.append(parse_identity(body))
        except InvalidSpecError:
            continue  # its own pass reports it
    return others


def check_unique(rt: Runtime, identity: Identity) -> None:
    """Refuse an agent id or a ServiceAccount an earlier identity of the cortex holds."""
    rival = rival_of(identity, _others(rt, identity))
    if rival is None:
        return
    holder, claim = rival
    error = DuplicateAgentIdError if claim.startswith("agent id") else \
        DuplicateServiceAccountError
    raise error(f"{claim} is held by AgentIdentity {holder.meta.name} (created first) for "
                f"cortex {identity.spec.cortex_ref.name}; this identity is not trusted and "
                "gets no key: change it or delete one of them")


def check_own_key(rt: Runtime, identity: Identity, secret: Object) -> None:
    """Refuse a key Secret that holds an earlier identity's recorded key."""
    fingerprint = read_public(secret).fingerprint
    holder = key_holder_of(identity, fingerprint, _others(rt, identity))
    if holder is not None:
        raise DuplicateKeyError(
            f"Secret {secret['metadata']['name']} holds key {fingerprint}, the key of "
            f"AgentIdentity {holder.meta.name}; one private key never serves two identities: "
            "delete the Secret (a new key is generated) or the AgentIdentity")


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
