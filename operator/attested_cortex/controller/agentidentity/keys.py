"""Key material as Secret data, in the ``--keys-dir`` file format (attest.keyfiles).

The private key exists in exactly two places: the process memory of the pass that generated
it and the Secret's data. It is never logged, never put in status or events; only the
public half is read back from a Secret.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from attested_cortex.attest import keyfiles
from attested_cortex.attest.keys import (
    PublicIdentity,
    fingerprint_of,
    generate_key,
    public_from_pem,
)
from attested_cortex.types import AgentId


@dataclass(frozen=True)
class PublicKeyInfo:
    """The public half of a key Secret, as status reports it."""

    agent_id: str
    public_key: str
    fingerprint: str


def new_key_files(agent_id: str) -> dict[str, str]:
    """A fresh Ed25519 key pair as the four identity files."""
    return keyfiles.identity_files(generate_key(AgentId(agent_id)))


class UnreadableKeyError(ValueError):
    """A key Secret whose public files are missing or inconsistent."""


def read_public(secret: Mapping[str, Any]) -> PublicKeyInfo:
    """The public key of a key Secret, checked against its fingerprint file."""
    data = secret.get("data") or {}
    try:
        agent = base64.b64decode(data[keyfiles.AGENT_ID_FILE]).decode().strip()
        raw = public_from_pem(base64.b64decode(data[keyfiles.PUBLIC_FILE]).decode())
    except (KeyError, ValueError) as exc:
        raise UnreadableKeyError(f"Secret {secret['metadata']['name']} has no readable "
                                 "agent-id and public.pem") from exc
    fingerprint = fingerprint_of(raw)
    recorded = base64.b64decode(data.get(keyfiles.FINGERPRINT_FILE, "")).decode().strip()
    if recorded and recorded != fingerprint:
        raise UnreadableKeyError(f"Secret {secret['metadata']['name']}: fingerprint does not "
                                 "match public.pem")
    return PublicKeyInfo(agent, PublicIdentity(AgentId(agent), raw).public_b64, fingerprint)
