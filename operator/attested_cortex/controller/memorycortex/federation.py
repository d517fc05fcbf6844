"""``spec.federation``'s objects (issue 42): the identity Secret (generated once, never
replaced: peers are configured with its public key), the peers' CA bundles ConfigMap, and
the client certificate: issued here from the selfSigned CA (renewed like the server's
leaf), asked of cert-manager for certManager, the user's ``clientSecretRef`` otherwise.
Called by :mod:`.server` (identity, bundles) and :mod:`.tls` (the certificate).
"""

from __future__ import annotations

import base64
from datetime import datetime

from attested_cortex import pki
from attested_cortex.attest import keyfiles
from attested_cortex.attest.keys import generate_key
from attested_cortex.builders import certificates, federation
from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.eventing import post_event
from attested_cortex.controller.memorycortex import tlsca
from attested_cortex.controller.runtime import Runtime
from attested_cortex.kubeclient import ApiConflictError
from attested_cortex.types import AgentId


async def prepare(rt: Runtime, cortex: Cortex) -> None:
    """The identity Secret and the peers' bundles. Nothing (not even a read) for a cortex
    without federation: a bundles ConfigMap left from an earlier spec is unused and goes
    with the cortex (owner reference)."""
    bundles = federation.build_peers_config_map(cortex)
    if bundles is None:
        return
    uid = await rt.namespace_uid(cortex.meta.namespace)
    await rt.create_once(lambda: federation.build_identity_secret(
        cortex, keyfiles.identity_files(generate_key(AgentId(federation.cortex_id(cortex)))),
        namespace_uid=uid), cortex.meta.namespace,
        n.federation_identity_secret_name(cortex.meta.name))
    await rt.writer.apply(bundles)


def _why_renew(cert_pem: str | None, ca: tlsca.CaState, now: datetime) -> str | None:
    if cert_pem is None:
        return "no certificate yet"
    if ca.switched or not pki.issued_by(cert_pem, ca.active.cert_pem):
        return "its CA changed"
    return "2/3 of its life has passed" if pki.renewal_due(cert_pem, now=now) else None


async def ensure_client(rt: Runtime, cortex: Cortex, ca: tlsca.CaState, now: datetime) -> None:
    """The selfSigned client certificate: made, or replaced when due (an Event says so)."""
    if not federation.operator_issues(cortex):
        return
    name = n.federation_tls_secret_name(cortex.meta.name)
    found = await rt.writer.get("v1", "Secret", cortex.meta.namespace, name)
    data = (found or {}).get("data") or {}
    cert_pem = base64.b64decode(data[certificates.CERT_KEY]).decode() \
        if certificates.CERT_KEY in data else None
    why = _why_renew(cert_pem, ca, now)
    if why is None:
        return
    leaf = pki.issue_leaf(ca.active, dns_names=[federation.cortex_id(cortex)], now=now,
                          client=True)
    built = federation.build_client_secret(cortex, cert_pem=leaf.cert_pem,
                                           key_pem=leaf.key_pem, ca_pem=ca.bundle)
    try:
        if found is None:
            await rt.writer.create(built)
            return
        built["metadata"]["resourceVersion"] = found["metadata"]["resourceVersion"]
        await rt.writer.replace(built)
    except ApiConflictError:
        return  # someone else wrote it: the next pass looks again
    await post_event(rt.writer, kind="MemoryCortex", meta=cortex.meta, type_="Normal",
                     reason="CertificateRenewed",
                     message=f"federation client certificate in Secret {name} renewed ({why})")


async def ensure_cert_manager(rt: Runtime, cortex: Cortex) -> None:
    """The client certificate's cert-manager Certificate (certManager TLS, federated)."""
    if federation.spec_of(cortex) is not None and cortex.spec.federation is not None \
            and cortex.spec.federation.identity.client_secret_ref is None:
        await rt.writer.apply(federation.build_client_certificate(cortex))
