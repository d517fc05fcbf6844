"""``spec.federation`` rendered into the server's settings, its Secrets, the peers' bundles
and the pod's mounts (builders/federation.py), from spec literals."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any

import yaml

from attested_cortex import pki
from attested_cortex.builders import configmaps, deployments, federation
from attested_cortex.builders.configmaps import Satellites
from attested_cortex.server.settings import ServerSettings
from tests.builders.specs import CORTEX, DEFAULTS, assert_child_metadata, cortex

PEER_KEY = base64.b64encode(bytes(range(32))).decode()
PEERS = [{"name": "team-b", "url": "https://cortex.team-b.example:8080",
          "caBundle": "-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n",
          "publicKey": PEER_KEY, "send": ["shared/**"], "accept": ["team/**"],
          "into": "fed/team-b"}]


def federated(tls: dict[str, Any] | None = None, **identity: Any) -> Any:
    return cortex({"server": {"tls": tls or {"selfSigned": {}}},
                   "federation": {"identity": identity, "peers": PEERS}})


def test_settings_render_peers_and_mounted_files() -> None:
    settings = configmaps.server_settings(federated(), Satellites())
    section = settings["federation"]
    assert section == {
        "identity_dir": federation.IDENTITY_DIR,
        "client_cert_file": f"{federation.CLIENT_DIR}/tls.crt",
        "client_key_file": f"{federation.CLIENT_DIR}/tls.key",
        "peers": [{"name": "team-b", "url": "https://cortex.team-b.example:8080",
                   "ca_file": f"{federation.PEERS_DIR}/team-b.crt", "public_key": PEER_KEY,
                   "send": ["shared/**"], "accept": ["team/**"], "into": "fed/team-b",
                   "trust_tier": "SemiTrusted", "scopes": None}]}
    # what the operator renders is what the server accepts
    ServerSettings.model_validate(yaml.safe_load(yaml.safe_dump(settings)))


def test_unfederated_or_plain_http_renders_nothing() -> None:
    assert "federation" not in configmaps.server_settings(cortex(), Satellites())
    plain = cortex({"federation": {"peers": PEERS}})  # refused at admission (CEL) anyway
    assert federation.federation_settings(plain) is None
    assert federation.volumes(plain) == ([], [])


def test_pod_mounts_identity_client_certificate_and_bundles() -> None:
    built = deployments.build_deployment(federated(), DEFAULTS, Satellites())
    pod = built["spec"]["template"]["spec"]
    by_name = {v["name"]: v for v in pod["volumes"]}
    assert by_name["federation-identity"]["secret"]["secretName"] == \
        f"{CORTEX}-federation-identity"
    assert by_name["federation-tls"]["secret"]["secretName"] == f"{CORTEX}-federation-tls"
    assert by_name["federation-peers"]["configMap"]["name"] == f"{CORTEX}-federation-peers"
    mounts = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert {federation.IDENTITY_DIR, federation.CLIENT_DIR, federation.PEERS_DIR} <= mounts


def test_client_certificate_issued_the_way_the_server_one_is() -> None:
    assert federation.operator_issues(federated())
    mine = federated(clientSecretRef={"name": "my-client"})
    assert not federation.operator_issues(mine)
    assert federation.client_secret(mine) == "my-client"
    managed = federated({"certManager": {"issuerRef": {"name": "corp"}}}, id="notes-eu")
    certificate = federation.build_client_certificate(managed)
    assert certificate["spec"]["commonName"] == "notes-eu"
    assert certificate["spec"]["usages"] == ["client auth", "digital signature"]
    assert certificate["spec"]["secretName"] == f"{CORTEX}-federation-tls"
    assert_child_metadata(certificate, name=f"{CORTEX}-federation-tls", component="server")


def test_client_secret_holds_a_client_leaf_named_by_the_cortex_id() -> None:
    ca = pki.issue_ca("ca", now=datetime.now(UTC))
    leaf = pki.issue_leaf(ca, dns_names=[federation.cortex_id(federated())],
                          now=datetime.now(UTC), client=True)
    secret = federation.build_client_secret(federated(), cert_pem=leaf.cert_pem,
                                            key_pem=leaf.key_pem, ca_pem=ca.cert_pem)
    assert secret["type"] == "kubernetes.io/tls"
    der = pki.load(leaf.cert_pem).public_bytes(pki.serialization.Encoding.DER)
    assert pki.client_name(der, ca.cert_pem) == CORTEX
    server = pki.issue_leaf(ca, dns_names=[CORTEX], now=datetime.now(UTC))
    server_der = pki.load(server.cert_pem).public_bytes(pki.serialization.Encoding.DER)
    assert pki.client_name(server_der, ca.cert_pem) is None  # a server certificate
    assert_child_metadata(secret, name=f"{CORTEX}-federation-tls", component="server")


def test_identity_secret_and_bundles() -> None:
    secret = federation.build_identity_secret(federated(), {"agent-id": CORTEX},
                                              namespace_uid="ns-uid")
    assert base64.b64decode(secret["data"]["agent-id"]).decode() == CORTEX
    assert [o["kind"] for o in secret["metadata"]["ownerReferences"]] == [
        "MemoryCortex", "Namespace"]
    bundles = federation.build_peers_config_map(federated())
    assert bundles is not None and bundles["data"] == {"team-b.crt": PEERS[0]["caBundle"]}
    assert_child_metadata(bundles, name=f"{CORTEX}-federation-peers", component="server")
