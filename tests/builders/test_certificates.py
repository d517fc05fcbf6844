"""``spec.server.tls`` in the built objects: the Secrets, bundle and Certificate, the mounts,
probes, ports and settings of the server pod, and the sidecars' CA (ADR 0047)."""

from __future__ import annotations

import base64

import jsonschema_rs

from attested_cortex.builders import certificates
from attested_cortex.builders.configmaps import Satellites, server_settings
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.services import build_server_service, endpoint
from attested_cortex.crd.hookchain import Hook
from attested_cortex.server.settings import ServerSettings
from tests.builders.specs import CORTEX, DEFAULTS, NAMESPACE, assert_child_metadata, cortex
from tests.builders.test_clusters import undeclared
from tests.support.certmanagercrd import certificate_schema

SELF_SIGNED = {"server": {"tls": {"selfSigned": {}}}}
OWN = {"server": {"tls": {"secretRef": {"name": "my-cert"}, "minVersion": "1.3"}}}
CERT_MANAGER = {"server": {"tls": {"certManager": {"issuerRef": {
    "name": "corp-ca", "kind": "ClusterIssuer"}}}}}
SERVICE_NAMES = [CORTEX, f"{CORTEX}.{NAMESPACE}", f"{CORTEX}.{NAMESPACE}.svc",
                 f"{CORTEX}.{NAMESPACE}.svc.cluster.local", "localhost"]
DAEMON = Hook.model_validate({"name": "linker", "events": ["post_store"], "mode": "Daemon",
                              "sidecar": {"image": "hooks/linker:1"}})


def decoded(secret: dict[str, object]) -> dict[str, str]:
    data = secret["data"]
    assert isinstance(data, dict)
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_self_signed_secrets_and_bundle() -> None:
    c = cortex(SELF_SIGNED)
    ca = certificates.build_ca_secret(c, cert_pem="CA", key_pem="CAKEY")
    leaf = certificates.build_leaf_secret(c, cert_pem="LEAF", key_pem="KEY", ca_pem="CA")
    bundle = certificates.build_ca_bundle(c, "CA")
    assert_child_metadata(ca, name=f"{CORTEX}-tls-ca", component="server")
    assert_child_metadata(leaf, name=f"{CORTEX}-tls", component="server")
    assert_child_metadata(bundle, name=f"{CORTEX}-ca", component="server")
    assert ca["type"] == leaf["type"] == "kubernetes.io/tls"
    assert decoded(ca) == {"tls.crt": "CA", "tls.key": "CAKEY"}
    assert decoded(leaf) == {"tls.crt": "LEAF", "tls.key": "KEY", "ca.crt": "CA"}
    assert bundle["data"] == {"ca.crt": "CA"}  # public: no key in a ConfigMap
    assert certificates.dns_names(c) == SERVICE_NAMES


def test_cert_manager_certificate() -> None:
    c = cortex(CERT_MANAGER)
    certificate = certificates.build_certificate(c)
    assert_child_metadata(certificate, name=f"{CORTEX}-tls", component="server")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["spec"] == {
        "secretName": f"{CORTEX}-tls", "commonName": CORTEX, "dnsNames": SERVICE_NAMES,
        "ipAddresses": ["127.0.0.1"], "usages": ["server auth", "digital signature"],
        "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
        "secretTemplate": {"labels": {"app.kubernetes.io/name": "attested-cortex",
                                      "app.kubernetes.io/instance": CORTEX,
                                      "app.kubernetes.io/managed-by":
                                          "attested-cortex-operator",
                                      "app.kubernetes.io/component": "server"}},
        "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}}
    schema = certificate_schema()  # cert-manager's own CRD (from its Go module)
    assert [e.message for e in jsonschema_rs.validator_for(schema).iter_errors(certificate)] \
        == []
    assert undeclared(certificate, schema) == []


def test_server_pod_mounts_the_certificate_and_probes_over_https() -> None:
    for spec, secret in ((SELF_SIGNED, f"{CORTEX}-tls"), (CERT_MANAGER, f"{CORTEX}-tls"),
                         (OWN, "my-cert")):
        pod = build_deployment(cortex(spec), DEFAULTS, Satellites())["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["tls"] == {"name": "tls", "secret": {
            "secretName": secret, "defaultMode": 0o440,
            "items": [{"key": "tls.crt", "path": "tls.crt"},
                      {"key": "tls.key", "path": "tls.key"}]}}
        server = pod["containers"][0]
        assert {"name": "tls", "mountPath": "/var/run/cortex/tls", "readOnly": True} in \
            server["volumeMounts"]
        assert server["ports"] == [{"name": "https", "containerPort": 8080, "protocol": "TCP"}]
        assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "https",
                                                       "scheme": "HTTPS"}
        assert server["livenessProbe"]["httpGet"]["scheme"] == "HTTPS"


def test_without_tls_the_pod_is_unchanged() -> None:
    pod = build_deployment(cortex(), DEFAULTS, Satellites())["spec"]["template"]["spec"]
    assert not {"tls", "tls-ca"} & {v["name"] for v in pod["volumes"]}
    assert pod["containers"][0]["readinessProbe"]["httpGet"] == {"path": "/readyz",
                                                                 "port": "http"}
    assert "tls" not in server_settings(cortex(), Satellites())
    assert endpoint(cortex()).startswith("http://")


def test_sidecars_get_the_ca_only_and_an_https_url() -> None:
    pod = build_deployment(cortex(OWN), DEFAULTS, Satellites(hooks=[DAEMON]))
    spec = pod["spec"]["template"]["spec"]
    sidecar = spec["containers"][1]
    env = {e["name"]: e["value"] for e in sidecar["env"]}
    assert env["CORTEX_URL"] == "https://127.0.0.1:8080"
    assert env["CORTEX_CA_FILE"] == "/var/run/cortex/tls-ca/ca.crt"
    mounted = {m["name"] for m in sidecar["volumeMounts"]}
    assert "tls-ca" in mounted and "tls" not in mounted  # never the server's key
    ca_volume = next(v for v in spec["volumes"] if v["name"] == "tls-ca")
    assert ca_volume["secret"] == {"secretName": "my-cert", "defaultMode": 0o444,
                                   "optional": True,
                                   "items": [{"key": "ca.crt", "path": "ca.crt"}]}


def test_service_port_endpoint_and_settings() -> None:
    c = cortex(OWN)
    assert build_server_service(c)["spec"]["ports"] == [
        {"name": "https", "port": 8080, "targetPort": "https", "protocol": "TCP"}]
    assert endpoint(c) == f"https://{CORTEX}.{NAMESPACE}.svc:8080"
    settings = server_settings(c, Satellites())
    assert settings["tls"] == {"cert_file": "/var/run/cortex/tls/tls.crt",
                               "key_file": "/var/run/cortex/tls/tls.key", "min_version": "1.3"}
    assert ServerSettings.model_validate(settings).tls is not None  # the server's own loader
