"""The server's certificate (ADR 0047): made and renewed here for selfSigned, asked of
cert-manager for certManager, left to the user for secretRef.

selfSigned, on each pass: the CA Secret is created once and renewed with an overlap
(``tlsca.py``, ADR 0058: a successor published beside it at 2/3 of its life, the leaves moved
to it later); the leaf Secret is created from it, and replaced (``replace`` with the read
``resourceVersion``, so a concurrent edit wins and the next pass looks again) when 2/3 of its
life has passed, when the CA no longer signs it (the CA Secret was deleted and made anew) or
when it lacks a Service name (its ``ca.crt`` is the bundle of every CA in the overlap); each
replacement posts a ``CertificateRenewed`` Event. The
server reloads the renewed files without a restart (``server/tls.py``); the pass asks to
come back when the next renewal is due. The CA bundle is published in the
``<cortex>-ca`` ConfigMap. Two Secret reads a pass; no write unless something is due.

certManager: the Certificate is applied; a cluster that does not serve
``certificates.cert-manager.io`` is ``CertManagerMissing`` (ServerReady False, the
Deployment not rolled), looked at again every :data:`MISSING_RETRY_S`. A Certificate left
from an earlier certManager spec is removed when the spec no longer asks for one.
The certificate's Secret itself is then one of the Secrets the server step requires
(``SecretMissing`` until cert-manager has issued it, or until the user's secretRef exists).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from attested_cortex import pki
from attested_cortex.builders import certificates
from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.memorycortex import federation, tlsca
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiConflictError, ApiNotFoundError

Object = dict[str, Any]
KIND: Final = "MemoryCortex"
MISSING_RETRY_S: Final = 30.0
#: The cert-manager release whose Certificate CRD the tests check the builder against.
CERT_MANAGER_RELEASE: Final = "1.21.2"
#: Come back at least this often to look at a leaf's age (a day: renewal is weeks early).
LONGEST_WAIT_S: Final = 86400.0


@dataclass(frozen=True)
class TlsOutcome:
    """What stops the server from rolling (None: nothing), and when to look again."""

    problem: Observation | None = None
    retry_in: float | None = None


def _pem(secret: Object | None, key: str) -> str:
    data = (secret or {}).get("data") or {}
    return base64.b64decode(data.get(key, "")).decode(errors="replace")


async def _secret(rt: Runtime, cortex: Cortex, name: str) -> Object | None:
    return await rt.writer.get("v1", "Secret", cortex.meta.namespace, name)


def _why_renew(leaf_pem: str, ca: tlsca.CaState, cortex: Cortex,
               now: datetime) -> str | None:
    if ca.switched:
        return "its CA was renewed"
    if not pki.issued_by(leaf_pem, ca.active.cert_pem):
        return "the CA does not sign it"
    if not pki.covers(leaf_pem, certificates.dns_names(cortex)):
        return "it lacks a Service name"
    if pki.renewal_due(leaf_pem, now=now):
        return "2/3 of its life has passed"
    return None


def _next_look(leaf_pem: str, now: datetime) -> float:
    cert = pki.load(leaf_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    due = start + (end - start) * pki.RENEW_AT
    return max(1.0, min(LONGEST_WAIT_S, (due - now).total_seconds()))


async def _self_signed(rt: Runtime, cortex: Cortex) -> TlsOutcome:
    now = datetime.now(UTC)
    ca = await tlsca.ensure_ca(rt, cortex, now)
    if ca is None:
        return TlsOutcome(retry_in=1.0)  # someone else wrote the CA Secret: look again
    name = n.tls_secret_name(cortex.meta.name)
    leaf_secret = await _secret(rt, cortex, name)
    leaf_pem = _pem(leaf_secret, certificates.CERT_KEY)
    why = "no certificate yet" if leaf_secret is None else _why_renew(leaf_pem, ca, cortex, now)
    if why is not None:
        leaf = pki.issue_leaf(ca.active, dns_names=certificates.dns_names(cortex),
                              ip_addresses=certificates.LOOPBACK_IPS, now=now)
        built = certificates.build_leaf_secret(cortex, cert_pem=leaf.cert_pem,
                                               key_pem=leaf.key_pem, ca_pem=ca.bundle)
        try:
            if leaf_secret is None:
                await rt.writer.create(built)
            else:
                built["metadata"]["resourceVersion"] = leaf_secret["metadata"]["resourceVersion"]
                await rt.writer.replace(built)
                await post_event(rt.writer, kind=KIND, meta=cortex.meta, type_="Normal",
                                 reason="CertificateRenewed",
                                 message=f"server certificate in Secret {name} renewed ({why}); "
                                 f"new SHA-256 fingerprint {pki.fingerprint(leaf.cert_pem)}")
        except ApiConflictError:
            return TlsOutcome(retry_in=1.0)  # someone else wrote it: look again
        leaf_pem = leaf.cert_pem
    await rt.writer.apply(certificates.build_ca_bundle(cortex, ca.bundle))
    await federation.ensure_client(rt, cortex, ca, now)
    look = min(_next_look(leaf_pem, now), max(1.0, tlsca.next_look(ca, now)))
    return TlsOutcome(retry_in=look)


async def _cert_manager(rt: Runtime, cortex: Cortex) -> TlsOutcome:
    try:
        await rt.writer.apply(certificates.build_certificate(cortex))
        await federation.ensure_cert_manager(rt, cortex)
    except ApiNotFoundError:
        return TlsOutcome(Observation.of(
            "ServerReady", False, "CertManagerMissing",
            "spec.server.tls.certManager needs cert-manager, and this cluster does not serve "
            f"certificates.cert-manager.io; install cert-manager (version {CERT_MANAGER_RELEASE} "
            "is the one tested), or choose selfSigned or secretRef"), MISSING_RETRY_S)
    return TlsOutcome()


async def ensure(rt: Runtime, cortex: Cortex) -> TlsOutcome:
    """The certificate the spec asks for; nothing without ``spec.server.tls``."""
    tls = cortex.spec.server.tls
    if tls is None:
        return TlsOutcome()
    if tls.cert_manager is not None:
        return await _cert_manager(rt, cortex)
    # A Certificate left from a certManager spec would overwrite the Secret (one GET; a
    # cluster without cert-manager answers it 404, read as "none").
    await rt.writer.remove(certificates.CERT_MANAGER, "Certificate", cortex.meta.namespace,
                           n.tls_secret_name(cortex.meta.name))
    if tls.self_signed is not None:
        return await _self_signed(rt, cortex)
    return TlsOutcome()
