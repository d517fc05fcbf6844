"""``spec.federation`` on the in-memory cluster (issue 42): the identity Secret generated once,
the client certificate issued from the selfSigned CA (common name: the cortex id), the peers'
bundles published, the settings rendered, and the pass idle afterwards; an old client
certificate is renewed with an Event."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import yaml

from attested_cortex import pki
from attested_cortex.attest.keys import public_from_pem
from attested_cortex.builders import federation
from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import parse_cortex
from tests.controller_fast.conftest import Operated, cortex
from tests.controller_fast.test_memorycortex_tls import CA, KIND, pem, roll

PEER = {"name": "team-b", "url": "https://cortex.team-b.example:8080",
        "caBundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
        "publicKey": base64.b64encode(bytes(32)).decode(), "accept": ["team/**"],
        "into": "fed/team-b"}
IDENTITY, CLIENT = n.federation_identity_secret_name("mem"), n.federation_tls_secret_name("mem")


def federated() -> dict[str, object]:
    return cortex("mem", server={"tls": {"selfSigned": {}}},
                  federation={"identity": {"id": "mem-eu"}, "peers": [PEER]})


def client_der(op: Operated) -> bytes:
    return pki.load(pem(op, CLIENT)).public_bytes(pki.serialization.Encoding.DER)


async def test_identity_client_certificate_and_settings_then_idle(op: Operated) -> None:
    op.apply(federated())
    await roll(op)
    identity = op.get("Secret", IDENTITY, "v1") or {}
    assert base64.b64decode(identity["data"]["agent-id"]).decode() == "mem-eu"
    public_key = public_from_pem(base64.b64decode(identity["data"]["public.pem"]).decode())
    assert len(public_key) == 32
    assert pki.client_name(client_der(op), pem(op, CA)) == "mem-eu"
    bundles = op.get("ConfigMap", n.federation_peers_name("mem"), "v1") or {}
    assert bundles["data"] == {"team-b.crt": PEER["caBundle"]}
    config = yaml.safe_load((op.get("ConfigMap", n.config_name("mem"), "v1") or {})[
        "data"]["config.yaml"])
    assert config["federation"]["peers"][0]["ca_file"] == f"{federation.PEERS_DIR}/team-b.crt"
    changes = op.cluster.changes
    await op.reconcile(KIND, "mem")
    assert op.cluster.changes == changes  # an idle pass writes nothing
    assert (op.get("Secret", IDENTITY, "v1") or {})["data"] == identity["data"]


async def test_an_old_client_certificate_is_renewed(op: Operated) -> None:
    op.apply(federated())
    await roll(op)
    ca = pki.Issued(pem(op, CA), pem(op, CA, "tls.key"))
    old = pki.issue_leaf(ca, dns_names=["mem-eu"], client=True,
                         now=datetime.now(UTC) - timedelta(days=61))
    secret = federation.build_client_secret(parse_cortex(op.get(KIND, "mem") or {}),
                                            cert_pem=old.cert_pem, key_pem=old.key_pem,
                                            ca_pem=ca.cert_pem)
    secret["metadata"]["namespace"] = "ns"
    secret["metadata"]["resourceVersion"] = (op.get("Secret", CLIENT, "v1") or {})[
        "metadata"]["resourceVersion"]
    op.cluster.replace(secret, manager="kubectl")
    await op.reconcile(KIND, "mem")
    renewed = pem(op, CLIENT)
    assert renewed != old.cert_pem and not pki.renewal_due(renewed, now=datetime.now(UTC))
    assert ("Normal", "CertificateRenewed") in op.events(KIND, "mem")
