"""What federation peers sign and publish, and the checks on arrival: pure, free of I/O.

Called by :mod:`attested_cortex.service.resources.federation` (inbound changes) and by the
keyring route (``GET /v1/federation/keyring``). Two things are signed here:

* A cortex's **published keyring** (docs/adr/0122): ``{cortex, issued_at, agents}`` (each
  agent a ``RawKeyringFile``, its revisions with their validity windows), signed with the
  cortex's Ed25519 identity key over the deterministic CBOR of those three entries. A
  receiver holds the peer's identity key from its configuration and trusts no keyring the
  key did not sign.
* An **agent's change**: a memory store or update signs the
  :class:`~.payloads.MemoryPayload` an agent signs locally (its namespace at the origin,
  title, content digest, author, ``signed_at``); a delete signs :class:`DeletePayload`.
  A change verifies when a key of its author whose window covers ``signed_at`` verifies it:
  a key rotated away still verifies what it signed inside its window, never after.
* An **origin statement** (ADR 0138): the local API takes no agent signature for a memory
  delete or a link invalidation, so the cortex where the object was made signs
  :class:`OriginStatement` with its federation identity key; a receiver checks it with the
  identity key it holds for that peer, and only for objects homed at the signing cortex.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from attested_cortex.attest import cbor
from attested_cortex.attest.keyring import (
    KeyRevision,
    Keyring,
    build_keyring,
    parse_keyring_file,
    render_keyring_file,
)
from attested_cortex.attest.keys import AgentKey
from attested_cortex.attest.payloads import link_payload, memory_payload
from attested_cortex.attest.signing import SIGNATURE_BYTES, sign, verify
from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId

#: Why a change was not verified (the quarantine's ``reason``).
Unverified = Literal["unsigned", "unknown_key", "bad_signature", "unknown_origin",
                     "not_origin_object", "origin_signature_not_allowed"]
#: The changes an origin cortex may sign with its identity key (ADR 0138).
ORIGIN_SIGNED_KINDS = frozenset({"memory.delete", "link.invalidate"})


@dataclass(frozen=True, slots=True)
class DeletePayload:
    """What an agent signs to delete a federated memory: the object at its home cortex."""

    home: str
    object_id: str
    author: str
    signed_at: int

    def encode(self) -> bytes:
        """The canonical CBOR bytes that are signed and verified."""
        return cbor.encode({"op": "memory.delete", "home": self.home,
                            "object_id": self.object_id, "author": self.author,
                            "signed_at": self.signed_at})


@dataclass(frozen=True, slots=True)
class InvalidatePayload:
    """What an agent signs to close a federated link's window (``None``: at once)."""

    home: str
    object_id: str
    author: str
    signed_at: int
    valid_until: int | None

    def encode(self) -> bytes:
        """The canonical CBOR bytes that are signed and verified."""
        return cbor.encode({"op": "link.invalidate", "home": self.home,
                            "object_id": self.object_id, "author": self.author,
                            "signed_at": self.signed_at, "valid_until": self.valid_until})


@dataclass(frozen=True, slots=True)
class OriginStatement:
    """What an origin cortex signs with its identity key for a delete or an invalidation
    it made: "``author`` did ``op`` on ``object_id`` (homed at ``home``) as ``origin``'s
    ``revision``, at ``signed_at``". The ``statement`` entry keeps its bytes apart from every
    agent payload, so no agent signature can pass for it, nor it for one."""

    op: str
    origin: str
    home: str
    object_id: str
    revision: int
    author: str
    signed_at: int
    valid_until: int | None

    def encode(self) -> bytes:
        """The canonical CBOR bytes that are signed and verified."""
        return cbor.encode({"statement": "cortex-origin", "op": self.op,
                            "origin": self.origin, "home": self.home,
                            "object_id": self.object_id, "revision": self.revision,
                            "author": self.author, "signed_at": self.signed_at,
                            "valid_until": self.valid_until})


@dataclass(frozen=True, slots=True)
class SignedChange:
    """The fields of one change a signature covers, whichever its kind. A link's ends are
    the memories' ids at their home cortexes; its signature is the ordinary
    :class:`~.payloads.LinkPayload` with ``observed_by`` = ``author``."""

    kind: str
    home: str
    object_id: str
    author: str
    signed_at: int
    namespace: str = ""
    title: str = ""
    content: str = ""
    src_id: str = ""
    dst_id: str = ""
    relation: str = ""
    valid_from: int = 0
    valid_until: int | None = None
    origin: str = ""
    revision: int = 0

    def statement(self) -> OriginStatement:
        """The origin's statement of this change (deletes and invalidations)."""
        return OriginStatement(self.kind, self.origin, self.home, self.object_id,
                               self.revision, self.author, self.signed_at,
                               self.valid_until if self.kind == "link.invalidate" else None)

    def message(self) -> bytes:
        """The bytes the author signed for this change."""
        if self.kind == "memory.delete":
            return DeletePayload(self.home, self.object_id, self.author,
                                 self.signed_at).encode()
        if self.kind == "link.invalidate":
            return InvalidatePayload(self.home, self.object_id, self.author, self.signed_at,
                                     self.valid_until).encode()
        if self.kind == "link.create":
            return link_payload(src_id=self.src_id, dst_id=self.dst_id, relation=self.relation,
                                observed_by=self.author, valid_from=self.valid_from,
                                valid_until=self.valid_until).encode()
        return memory_payload(namespace=self.namespace, title=self.title, content=self.content,
                              author=self.author, signed_at=self.signed_at).encode()


@dataclass(frozen=True, slots=True)
class Verified:
    """The key that verified a change."""

    key: KeyRevision


def sign_change(key: AgentKey, change: SignedChange) -> str:
    """Base64 of the author's signature over ``change`` (senders and tests)."""
    return base64.b64encode(sign(key, change.message())).decode("ascii")


def check_change(change: SignedChange, signature: str | None,
                 keyring: Keyring) -> Verified | Unverified:
    """The key of ``change.author`` that verifies ``signature``, within its window at
    ``signed_at``; or why not."""
    if signature is None:
        return "unsigned"
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return "bad_signature"
    if len(raw) != SIGNATURE_BYTES:
        return "bad_signature"
    if not keyring.knows(change.author):
        return "unknown_key"
    message = change.message()
    for revision in keyring.keys_at(change.author, change.signed_at):
        if verify(revision.public_key, message, raw):
            return Verified(revision)
    return "bad_signature"


def sign_origin(identity: AgentKey, change: SignedChange) -> str:
    """Base64 of the origin cortex's identity signature over ``change``'s statement."""
    return base64.b64encode(sign(identity, change.statement().encode())).decode("ascii")


def check_origin(change: SignedChange, signature: str | None,
                 identities: Mapping[str, bytes]) -> Verified | Unverified:
    """Whether ``change`` is a delete or an invalidation its origin cortex signed with the
    identity key ``identities`` holds for it, of an object homed there (ADR 0138). The
    verifying key is named after the origin cortex."""
    if signature is None:
        return "unsigned"
    if change.kind not in ORIGIN_SIGNED_KINDS:
        return "origin_signature_not_allowed"
    if change.home != change.origin:
        return "not_origin_object"
    public_key = identities.get(change.origin)
    if public_key is None:
        return "unknown_origin"
    try:
        raw = base64.b64decode(signature, validate=True)
    except (binascii.Error, ValueError):
        return "bad_signature"
    if len(raw) != SIGNATURE_BYTES or not verify(public_key, change.statement().encode(), raw):
        return "bad_signature"
    return Verified(KeyRevision(AgentId(change.origin), public_key))


def _signed_part(cortex: str, issued_at: int, agents: list[Any]) -> bytes:
    return cbor.encode({"cortex": cortex, "issued_at": issued_at, "agents": agents})


def keyring_document(identity: AgentKey, keyring: Keyring, *, issued_at: int) -> dict[str, Any]:
    """The keyring this cortex publishes, signed with its identity key."""
    agents: list[Any] = [dict(render_keyring_file(keyring.by_agent[a]))
                         for a in keyring.agents()]
    for agent in agents:
        agent["keys"] = [dict(k) for k in agent["keys"]]
    signature = sign(identity, _signed_part(identity.agent_id, issued_at, agents))
    return {"cortex": identity.agent_id, "issued_at": issued_at, "agents": agents,
            "signature": base64.b64encode(signature).decode("ascii")}


def parse_keyring_document(raw: Mapping[str, Any], *, cortex: str,
                           public_key: bytes) -> Keyring:
    """A peer's published keyring, once its identity key's signature checks; else
    :class:`InvalidInputError` (``bad_peer_keyring``)."""
    try:
        agents, issued_at = raw["agents"], raw["issued_at"]
        signature = base64.b64decode(raw["signature"], validate=True)
        if raw["cortex"] != cortex or not isinstance(agents, list) \
                or not isinstance(issued_at, int):
            raise ValueError("the keyring names another cortex or is malformed")
        if not verify(public_key, _signed_part(cortex, issued_at, agents), signature):
            raise ValueError("its signature does not verify under the peer's identity key")
    except (KeyError, TypeError, ValueError, binascii.Error) as exc:
        raise InvalidInputError(f"the keyring of peer {cortex} is refused: {exc}",
                                code="bad_peer_keyring") from exc
    revisions: list[KeyRevision] = []
    for agent in agents:
        revisions.extend(parse_keyring_file(agent))
    return build_keyring(revisions)
