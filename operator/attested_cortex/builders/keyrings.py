"""Public keys of a cortex's AgentIdentities as keyring files (``RawKeyringFile``). Pure.

Every identity, whatever its custody, contributes its current public key and the retired
ones still within ``revisionHistoryLimit`` (``status.previousKeys``). A revision is valid
from the moment the one before it retired until it retired itself, so a link signed before
a rotation still verifies after it.

One agent id, one identity: of the identities of a cortex that name the same agent id (or
map the same ServiceAccount), the one created first (then the first by name) holds it, and
only its keys and mapping are trusted; the others are refused by their controller
(``DuplicateAgentId``, ``DuplicateServiceAccount``), so a cortex never trusts two current
keys for one agent, or two agents for one ServiceAccount, from two objects (ADR 0021). A
key Secret placed by hand with an earlier identity's key is refused too (``DuplicateKey``,
:func:`key_holder_of`) before its key is ever recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from attested_cortex.builders.inputs import Identity

Object = dict[str, Any]


def agent_id(identity: Identity) -> str:
    """The effective agent id: ``spec.agentId`` or ``k8s:<namespace>/<name>``."""
    return identity.spec.agent_id or f"k8s:{identity.meta.namespace}/{identity.meta.name}"


def _precedence(identity: Identity) -> tuple[str, str]:
    return identity.meta.created or "~", identity.meta.name


def claims(identity: Identity) -> set[str]:
    """What an identity makes the cortex trust it for: its agent id and its ServiceAccount."""
    out = {f"agent id {agent_id(identity)}"}
    if identity.spec.service_account_ref is not None:
        ref = identity.spec.service_account_ref.name
        out.add(f"service account {identity.meta.namespace}/{ref}")
    return out


def rival_of(identity: Identity, others: Iterable[Identity]) -> tuple[Identity, str] | None:
    """The identity created before ``identity`` that holds one of its claims, and the
    claim (None: ``identity`` holds all of its own)."""
    mine, rank = claims(identity), _precedence(identity)
    for other in sorted(others, key=_precedence):
        shared = sorted(mine & claims(other))
        if other.meta.uid != identity.meta.uid and _precedence(other) < rank and shared:
            return other, shared[0]
    return None


def key_holder_of(identity: Identity, fingerprint: str,
                  others: Iterable[Identity]) -> Identity | None:
    """An identity created before ``identity`` whose recorded key is ``fingerprint`` (a key
    Secret placed by hand with another identity's key)."""
    rank = _precedence(identity)
    return next((o for o in sorted(others, key=_precedence)
                 if o.meta.uid != identity.meta.uid and _precedence(o) < rank
                 and o.status.fingerprint == fingerprint), None)


def admitted(identities: Iterable[Identity]) -> list[Identity]:
    """The identities that hold their claims (every later duplicate dropped)."""
    every = list(identities)
    return [i for i in every if rival_of(i, every) is None]


def _ms(at: datetime | None) -> int | None:
    return None if at is None else int(at.timestamp() * 1000)


def keyring_file(identity: Identity) -> Object | None:
    """The keyring document of one identity, or None before its key exists."""
    status = identity.status
    if not status.public_key or not status.fingerprint or not status.key_revision:
        return None
    previous = sorted(status.previous_keys or [], key=lambda k: k.key_revision)
    keys: list[Object] = []
    start: int | None = None
    for old in previous:
        keys.append({"revision": old.key_revision, "public_key": old.public_key,
                     "fingerprint": old.fingerprint, "valid_from": start,
                     "valid_until": _ms(old.retired_at)})
        start = _ms(old.retired_at)
    keys.append({"revision": status.key_revision, "public_key": status.public_key,
                 "fingerprint": status.fingerprint, "valid_from": start, "valid_until": None})
    return {"agent_id": agent_id(identity), "keys": keys}


def keyring_files(identities: Iterable[Identity]) -> dict[str, Object]:
    """``keyring-<identity>.json`` -> document, for every identity with a key."""
    out: dict[str, Object] = {}
    for identity in sorted(admitted(identities), key=lambda i: i.meta.name):
        document = keyring_file(identity)
        if document is not None:
            out[f"keyring-{identity.meta.name}.json"] = document
    return out
