"""Attestation: agent Ed25519 identities, canonical-CBOR link signatures, the audit chain.

The public surface the service layer, the CLI and the operator use; the modules behind it
are small and mostly pure:

* :mod:`.cbor` — RFC 8949 §4.2.1 deterministic encoding (pure)
* :mod:`.payloads` — the signed link payload (pure)
* :mod:`.keys`, :mod:`.keyring` — key values, PEM forms, trusted keys per agent (pure)
* :mod:`.keyfiles`, :mod:`.loading` — the on-disk identity format and reloading (I/O)
* :mod:`.signing`, :mod:`.levels`, :mod:`.chain` — sign/verify, attest_level, hash rule (pure)
* :mod:`.auditing` — append to and verify the signed_events chain (async, database)
* :mod:`.sealing` — the HMAC-keyed chain: the seal appends use and the keyed walk (pure)

Errors are the shared tree of :mod:`attested_cortex.errors`: bad input and bad signatures
raise ``InvalidInputError``, replays ``ConflictError``.
"""

from attested_cortex.attest.auditing import ChainReport, append_event, verify_chain
from attested_cortex.attest.keyring import KeyRevision, Keyring, build_keyring
from attested_cortex.attest.keys import AgentKey, PublicIdentity, generate_key
from attested_cortex.attest.levels import (
    AttestationOutcome,
    AttestLevel,
    KeyCustody,
    check_replay,
    decide_attestation,
    verify_stored,
)
from attested_cortex.attest.loading import KeySnapshot, KeySource
from attested_cortex.attest.payloads import LinkPayload, link_payload
from attested_cortex.attest.signing import parse_signature, sign, verify

__all__ = [
    "AgentKey",
    "AttestLevel",
    "AttestationOutcome",
    "ChainReport",
    "KeyCustody",
    "KeyRevision",
    "KeySnapshot",
    "KeySource",
    "Keyring",
    "LinkPayload",
    "PublicIdentity",
    "append_event",
    "build_keyring",
    "check_replay",
    "decide_attestation",
    "generate_key",
    "link_payload",
    "parse_signature",
    "sign",
    "verify",
    "verify_chain",
    "verify_stored",
]
