"""The agent signatures a bundle's rows carry, checked against the bundle's (or the trusted)
keys: every signed link, and the signature of every memory's current revision. Pure.

Called by :mod:`.importing` over the rows it copied in, before it commits. The payload is
recomputed from the row exactly as ``GET /v1/links/{id}/verify`` and
``GET /v1/memories/{id}/verify`` do (a link's asserted window, a memory's current title,
namespace and content), and the signature must verify under a key of the signer trusted when
it was signed. An older revision's signature signs content the row no longer holds: the
chain's record of that write carries its digest, which the deep sweep compares.
"""

from __future__ import annotations

from datetime import datetime

from attested_cortex.attest.keyring import Keyring
from attested_cortex.attest.levels import verifying_key
from attested_cortex.attest.payloads import link_payload, memory_payload, to_unix_ms
from attested_cortex.errors import InvalidInputError
from attested_cortex.store.links import Link
from attested_cortex.store.memories import Memory


def link_verifies(link: Link, keyring: Keyring) -> bool:
    """Whether a signed link's signature verifies (True for an unsigned link)."""
    if link.signature is None:
        return True
    try:
        payload = link_payload(src_id=link.src_id, dst_id=link.dst_id, relation=link.relation,
                               observed_by=link.observed_by, valid_from=link.valid_from,
                               valid_until=link.asserted_until)
    except InvalidInputError:
        return False
    signed_at = to_unix_ms(link.signed_at or link.created_at)
    return verifying_key(payload, link.signature, keyring=keyring,
                         signed_at_ms=signed_at) is not None


def memory_verifies(memory: Memory, *, signature: bytes, signed_by: str, signed_at: datetime,
                    keyring: Keyring) -> bool:
    """Whether the signature of a memory's current revision verifies."""
    payload = memory_payload(namespace=memory.namespace, title=memory.title,
                             content=memory.content, author=signed_by, signed_at=signed_at)
    return verifying_key(payload.encode(), signature, keyring=keyring,
                         signed_at_ms=to_unix_ms(signed_at), agent_id=signed_by) is not None
