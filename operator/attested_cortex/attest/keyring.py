"""Trusted public keys per agent id, each revision with its validity window.

Pure. Built by :mod:`~attested_cortex.attest.loading` from mounted files (or by tests from
plain values); read by :mod:`~attested_cortex.attest.levels` and
:mod:`~attested_cortex.attest.auditing`.

A key revision is trusted for signatures made in ``[valid_from, valid_until)`` (Unix ms;
``None`` means open on that side). Rotation closes the old revision's window at the
rotation time and opens the new one there, so a link signed before a rotation still
verifies against the old key, and a signature made with a retired key after its window
closed does not.

Wire form (``RawKeyringFile``, one JSON document per agent; ``cortexctl identity export-pub``
prints exactly this)::

    {"agent_id": "k8s:team-a/planner",
     "keys": [{"revision": 1, "public_key": "<base64 of raw 32 bytes>",
               "fingerprint": "<sha256 hex>", "valid_from": null, "valid_until": 1767225600000}]}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from attested_cortex.attest.keys import PublicIdentity, fingerprint_of, public_from_b64
from attested_cortex.errors import InvalidInputError
from attested_cortex.types import AgentId, Fingerprint


class RawKeyRevision(TypedDict):
    """One key revision as JSON."""

    revision: int
    public_key: str
    fingerprint: str
    valid_from: int | None
    valid_until: int | None


class RawKeyringFile(TypedDict):
    """All known key revisions of one agent as JSON."""

    agent_id: str
    keys: list[RawKeyRevision]


@dataclass(frozen=True, slots=True)
class KeyRevision:
    """One public key of an agent and the window in which its signatures are trusted."""

    agent_id: AgentId
    public_key: bytes
    revision: int = 1
    valid_from: int | None = None
    valid_until: int | None = None

    @property
    def fingerprint(self) -> Fingerprint:
        """SHA-256 (hex) of the raw public key."""
        return fingerprint_of(self.public_key)

    def covers(self, at_ms: int) -> bool:
        """Whether a signature made at ``at_ms`` falls inside this revision's window."""
        after_start = self.valid_from is None or at_ms >= self.valid_from
        return after_start and (self.valid_until is None or at_ms < self.valid_until)


@dataclass(frozen=True, slots=True)
class Keyring:
    """An immutable set of trusted key revisions, indexed by agent id."""

    by_agent: Mapping[AgentId, tuple[KeyRevision, ...]]

    def knows(self, agent_id: str) -> bool:
        """Whether any key at all is trusted for ``agent_id``."""
        return bool(self.by_agent.get(AgentId(agent_id)))

    def keys_at(self, agent_id: str, at_ms: int) -> tuple[KeyRevision, ...]:
        """The revisions of ``agent_id`` whose window covers ``at_ms``, newest first."""
        revisions = self.by_agent.get(AgentId(agent_id), ())
        return tuple(r for r in revisions if r.covers(at_ms))

    def agents(self) -> tuple[AgentId, ...]:
        """Every agent id with at least one trusted key, sorted."""
        return tuple(sorted(a for a, revs in self.by_agent.items() if revs))


EMPTY_KEYRING = Keyring({})


def build_keyring(revisions: Iterable[KeyRevision]) -> Keyring:
    """Index revisions by agent, newest revision first."""
    grouped: dict[AgentId, list[KeyRevision]] = {}
    for revision in revisions:
        grouped.setdefault(revision.agent_id, []).append(revision)
    return Keyring({a: tuple(sorted(rs, key=lambda r: -r.revision)) for a, rs in grouped.items()})


def revision_of(identity: PublicIdentity) -> KeyRevision:
    """A single, always-valid revision for an identity with no recorded history."""
    return KeyRevision(identity.agent_id, identity.public_key)


def parse_keyring_file(raw: Any) -> list[KeyRevision]:
    """Validate one ``RawKeyringFile`` document; fingerprints must match their keys."""
    if not isinstance(raw, dict) or not isinstance(raw.get("agent_id"), str):
        raise InvalidInputError("keyring file needs a text agent_id", code="bad_keyring")
    if not isinstance(raw.get("keys"), list):
        raise InvalidInputError("keyring file needs a keys list", code="bad_keyring")
    return [_parse_revision(AgentId(raw["agent_id"]), entry) for entry in raw["keys"]]


def render_keyring_file(revisions: Iterable[KeyRevision]) -> RawKeyringFile:
    """The JSON document for one agent's revisions (inverse of :func:`parse_keyring_file`)."""
    items = list(revisions)
    return {
        "agent_id": items[0].agent_id if items else "",
        "keys": [
            {
                "revision": r.revision,
                "public_key": PublicIdentity(r.agent_id, r.public_key).public_b64,
                "fingerprint": r.fingerprint,
                "valid_from": r.valid_from,
                "valid_until": r.valid_until,
            }
            for r in items
        ],
    }


def _parse_revision(agent_id: AgentId, entry: Any) -> KeyRevision:
    if not isinstance(entry, dict) or not isinstance(entry.get("public_key"), str):
        raise InvalidInputError("each key needs a base64 public_key", code="bad_keyring")
    revision = KeyRevision(
        agent_id=agent_id,
        public_key=public_from_b64(entry["public_key"]),
        revision=_optional_int(entry.get("revision", 1), "revision") or 1,
        valid_from=_optional_int(entry.get("valid_from"), "valid_from"),
        valid_until=_optional_int(entry.get("valid_until"), "valid_until"),
    )
    if entry.get("fingerprint") not in (None, revision.fingerprint):
        raise InvalidInputError("fingerprint does not match public_key", code="bad_keyring")
    return revision


def _optional_int(value: Any, name: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise InvalidInputError(f"{name} must be an integer or null", code="bad_keyring")
