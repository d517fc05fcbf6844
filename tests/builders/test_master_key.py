"""The master key Secret (ADR 0050): its literal, its owners, and the mounted Secret loading
as the key ring config.yaml points the server at."""

import base64
from pathlib import Path

from attested_cortex.attest import masterkeys
from attested_cortex.builders.configmaps import Satellites, build_config_map
from attested_cortex.builders.deployments import build_deployment
from attested_cortex.builders.secrets import build_master_key_secret
from attested_cortex.server.configuring import key_ring_from
from attested_cortex.server.settings import load_settings
from tests.builders.specs import API_VERSION, CORTEX, CORTEX_UID, DEFAULTS, NAMESPACE, cortex

KEY = bytes(range(32))


def test_master_key_secret_literal() -> None:
    secret = build_master_key_secret(cortex(), masterkeys.ring_files({1: KEY}, current=1),
                                     namespace_uid="ns-uid")
    assert secret == {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {
            "name": f"{CORTEX}-master-key", "namespace": NAMESPACE,
            "labels": {"app.kubernetes.io/name": "attested-cortex",
                       "app.kubernetes.io/instance": CORTEX,
                       "app.kubernetes.io/component": "server",
                       "app.kubernetes.io/managed-by": "attested-cortex-operator"},
            "ownerReferences": [
                {"apiVersion": API_VERSION, "kind": "MemoryCortex", "name": CORTEX,
                 "uid": CORTEX_UID, "controller": True, "blockOwnerDeletion": True},
                {"apiVersion": "v1", "kind": "Namespace", "name": NAMESPACE, "uid": "ns-uid"}]},
        "data": {"v1": base64.b64encode(KEY.hex().encode()).decode(),
                 "current": base64.b64encode(b"v1").decode()}}


def test_the_mounted_secret_is_the_servers_key_ring(tmp_path: Path) -> None:
    """The built Secret written where the Deployment mounts it (as the kubelet does: every
    key a file), config.yaml loaded as ``cortexctl serve`` loads it: the ring has v1."""
    c = cortex()
    secret = build_master_key_secret(c, masterkeys.ring_files({1: KEY}, current=1),
                                     namespace_uid="ns-uid")
    pod = build_deployment(c, DEFAULTS, Satellites())["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "master-key")
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "master-key")
    assert volume["secret"] == {"secretName": f"{CORTEX}-master-key", "defaultMode": 0o440}
    assert mount["readOnly"] is True
    root = tmp_path / "root"
    directory = root / Path(mount["mountPath"]).relative_to("/")
    directory.mkdir(parents=True)
    for key, value in secret["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    config = tmp_path / "config.yaml"
    config.write_text(build_config_map(c, Satellites())["data"]["config.yaml"], encoding="utf-8")
    settings = load_settings(config, {})
    assert settings.master_key is not None and settings.master_key.dir is not None
    settings.master_key.dir = root / settings.master_key.dir.relative_to("/")
    ring = key_ring_from(settings)
    assert ring is not None and ring.current == 1 and ring.versions == [1]
    assert ring.subkey("audit") == masterkeys.derive_subkey(KEY, "audit")
