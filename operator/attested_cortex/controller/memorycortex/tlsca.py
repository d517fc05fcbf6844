"""The selfSigned CA of a cortex (ADR 0047) and its renewal with an overlap (ADR 0058).

Called by ``tls.py`` on every selfSigned pass. The CA Secret ``<cortex>-tls-ca`` is created
once (a lost create race reads the winner's). Renewal follows ``pki.ca_rotation``: at 2/3 of
the CA's life a successor is made and *published* (``next.crt``/``next.key`` in the Secret,
both CAs in ConfigMap ``<cortex>-ca`` and in the leaf's ``ca.crt``) while the leaf stays
signed by the old CA, so a client holding the old bundle keeps working and one that fetched
the new bundle works either way; at 5/6 (and at least 1/6 of the old life after publishing)
the leaves *switch* to the successor (``tls.py`` re-issues the leaf at once) and the old CA's
certificate stays in the bundle as ``previous.crt`` until it expires. Each step is a
``replace`` with the read ``resourceVersion`` (a concurrent edit wins; the next pass looks
again) and posts an Event (``CARenewing``, ``CARotated``); no write when nothing is due.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final

from attested_cortex import pki
from attested_cortex.builders import certificates as c
from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiConflictError

Object = dict[str, Any]
KIND: Final = "MemoryCortex"


@dataclass(frozen=True)
class CaState:
    """The CA that signs the leaf, its published successor, the CA it replaced (its
    certificate only), and whether this pass switched to it."""

    active: pki.Issued
    successor: pki.Issued | None = None
    previous_pem: str | None = None
    switched: bool = False

    @property
    def bundle(self) -> str:
        """What clients trust: every CA a served leaf may be signed by in the overlap."""
        return c.ca_bundle(self.active.cert_pem,
                           self.successor.cert_pem if self.successor else None,
                           self.previous_pem)

    def secret(self, cortex: Cortex) -> Object:
        successor = self.successor
        return c.build_ca_secret(
            cortex, cert_pem=self.active.cert_pem, key_pem=self.active.key_pem,
            successor=(successor.cert_pem, successor.key_pem) if successor else None,
            previous_pem=self.previous_pem)


def _pem(secret: Object, key: str) -> str | None:
    value = (secret.get("data") or {}).get(key)
    return base64.b64decode(value).decode(errors="replace") if value else None


def _read(secret: Object) -> CaState:
    successor_pem, successor_key = _pem(secret, c.NEXT_CERT_KEY), _pem(secret, c.NEXT_KEY_KEY)
    return CaState(
        pki.Issued(_pem(secret, c.CERT_KEY) or "", _pem(secret, c.KEY_KEY) or ""),
        pki.Issued(successor_pem, successor_key) if successor_pem and successor_key else None,
        _pem(secret, c.PREVIOUS_CERT_KEY))


def _common_name(cortex: Cortex, now: datetime | None = None) -> str:
    # A successor's subject differs from its predecessor's (both sit in one trust bundle).
    stamp = f" {now:%Y%m%dT%H%M%SZ}" if now is not None else ""
    return f"{cortex.meta.namespace}/{cortex.meta.name} cortex CA{stamp}"


async def _created(rt: Runtime, cortex: Cortex, now: datetime) -> Object | None:
    """The CA Secret, made when missing (None: a create race lost, read it next pass)."""
    issued = pki.issue_ca(_common_name(cortex), now=now)
    try:
        return await rt.writer.create(CaState(issued).secret(cortex))
    except ApiConflictError:
        return None


def _next(state: CaState, now: datetime, cortex: Cortex) -> tuple[CaState, str, str] | None:
    """The state after this pass's step, with its Event's reason and message (None: keep)."""
    bundle = f"ConfigMap {n.ca_bundle_name(cortex.meta.name)}"
    successor = state.successor
    step = pki.ca_rotation(state.active.cert_pem, successor.cert_pem if successor else None,
                           now=now)
    if step == "publish":
        made = pki.issue_ca(_common_name(cortex, now), now=now)
        due = pki.ca_step_due(state.active.cert_pem, made.cert_pem) or now
        return (replace(state, successor=made), "CARenewing",
                f"new CA (SHA-256 fingerprint {pki.fingerprint(made.cert_pem)}) published "
                f"beside the current one in {bundle}; the server's certificate moves to it "
                f"at {max(due, now):%Y-%m-%dT%H:%M:%SZ}")
    if step == "switch" and successor is not None:
        return (CaState(successor, None, state.active.cert_pem, switched=True), "CARotated",
                f"server certificates are now issued by the new CA (SHA-256 fingerprint "
                f"{pki.fingerprint(successor.cert_pem)}); the old one stays in {bundle} "
                "until it expires")
    if state.previous_pem is not None and pki.expired(state.previous_pem, now=now):
        return replace(state, previous_pem=None), "", ""
    return None


async def ensure_ca(rt: Runtime, cortex: Cortex, now: datetime) -> CaState | None:
    """The CA after this pass's step (None: someone else wrote the Secret; look again)."""
    name = n.tls_ca_secret_name(cortex.meta.name)
    found = await rt.writer.get("v1", "Secret", cortex.meta.namespace, name)
    if found is None and (found := await _created(rt, cortex, now)) is None:
        return None
    state = _read(found)
    step = _next(state, now, cortex)
    if step is None:
        return state
    after, reason, message = step
    built = after.secret(cortex)
    built["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
    try:
        await rt.writer.replace(built)
    except ApiConflictError:
        return None
    if reason:
        await post_event(rt.writer, kind=KIND, meta=cortex.meta, type_="Normal",
                         reason=reason, message=message)
    return after


def next_look(state: CaState, now: datetime) -> float:
    """Seconds until the CA's next step or the old CA's expiry."""
    successor = state.successor
    dues = [pki.ca_step_due(state.active.cert_pem, successor.cert_pem if successor else None)]
    if state.previous_pem is not None and not pki.expired(state.previous_pem, now=now):
        dues.append(pki.load(state.previous_pem).not_valid_after_utc)
    return min((d - now).total_seconds() if d is not None else 0.0 for d in dues)
