"""``--auth kubernetes`` against the real API server: a service-account token is reviewed
(TokenReview) and becomes the agent ``k8s:<namespace>/<name>``; anything else is 401."""

import base64
import shutil
from pathlib import Path

import pytest
import yaml
from hack.support.kube import Kube

from attested_cortex.server.auth_kubernetes import KubernetesAuth, client_review
from attested_cortex.server.configuring import agent_map, agent_tiers
from attested_cortex.server.settings import ServerSettings
from tests.support.cortex import MakeCortex

pytestmark = pytest.mark.kube


async def test_service_account_token_is_the_agent(
    kube: Kube, kube_namespace: str, make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    kube.kubectl("-n", kube_namespace, "create", "serviceaccount", "planner")
    token = kube.kubectl("-n", kube_namespace, "create", "token", "planner").stdout.strip()
    auth = KubernetesAuth(client_review(kubeconfig=kube.kubeconfig))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, auth=auth)
    stored = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"},
                               agent=None, headers={"Authorization": f"Bearer {token}"})
    assert stored.status == 201, stored.text
    assert stored.body["author"] == f"k8s:{kube_namespace}/planner"
    forged = await client.call("GET", "/v1/capabilities", agent=None,
                               headers={"Authorization": f"Bearer {token[:-4]}AAAA"})
    assert forged.status == 401 and token not in forged.text
    spoofed = await client.call("GET", "/v1/capabilities", agent="k8s:other/admin")
    assert spoofed.status == 401
    # a valid token with another agent's id beside it is still the token's agent
    beside = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "d"},
                               agent=None, headers={"Authorization": f"Bearer {token}",
                                                    "X-Agent-Id": "k8s:other/admin"})
    assert beside.status == 201 and beside.body["author"] == f"k8s:{kube_namespace}/planner"


async def test_the_config_maps_service_accounts_to_agents_and_scopes(
    kube: Kube, kube_namespace: str, make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    kube.kubectl("-n", kube_namespace, "create", "serviceaccount", "reader")
    token = kube.kubectl("-n", kube_namespace, "create", "token", "reader").stdout.strip()
    settings = ServerSettings(agents=[{  # what the operator renders from AgentIdentity
        "service_account": f"{kube_namespace}/reader", "agent_id": "team:reader",
        "scopes": ["memory.read:shared/**"]}])
    auth = KubernetesAuth(client_review(kubeconfig=kube.kubeconfig), agents=agent_map(settings))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, auth=auth)
    bearer = {"Authorization": f"Bearer {token}"}
    caps = await client.call("GET", "/v1/capabilities", agent=None, headers=bearer)
    assert caps.body["quotas"]["you"]["agent_id"] == "team:reader"
    assert caps.body["quotas"]["you"]["scopes"] == ["memory.read:shared/**"]
    write = await client.call("POST", "/v1/memories", {"namespace": "shared/x", "content": "c"},
                              agent=None, headers=bearer)
    assert write.status == 403 and write.body["error"]["code"] == "scope_denied"


async def test_the_mapping_gives_the_trust_tier(
    kube: Kube, kube_namespace: str, make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    """ADR 0049: the AgentIdentity's trustTier, rendered as the mapping's trust_tier, caps
    the agent's scopes on every request (the reviewed one and the cached ones)."""
    kube.kubectl("-n", kube_namespace, "create", "serviceaccount", "relay")
    token = kube.kubectl("-n", kube_namespace, "create", "token", "relay").stdout.strip()
    settings = ServerSettings(agents=[{
        "service_account": f"{kube_namespace}/relay", "agent_id": "team:relay",
        "trust_tier": "SemiTrusted"}])
    auth = KubernetesAuth(client_review(kubeconfig=kube.kubeconfig), agents=agent_map(settings),
                          tiers=agent_tiers(settings))
    client = await make_cortex(migrated_pg15_dsn, migrated=False, auth=auth)
    bearer = {"Authorization": f"Bearer {token}"}
    for _ in range(2):  # reviewed, then from the cache
        caps = await client.call("GET", "/v1/capabilities", agent=None, headers=bearer)
        assert caps.body["trust"]["you"]["tier"] == "SemiTrusted"
        assert caps.body["trust"]["you"]["effective_scopes"] == ["memory.read", "memory.write"]
    stored = await client.call("POST", "/v1/memories", {"namespace": "n", "content": "c"},
                               agent=None, headers=bearer)
    assert stored.status == 201, stored.text
    forget = await client.call("DELETE", f"/v1/memories/{stored.body['id']}", agent=None,
                               headers=bearer)
    assert forget.status == 403 and forget.body["error"]["code"] == "trust_ceiling"
    assert forget.body["error"]["details"]["mark"] == "qualified"


async def test_an_unreachable_api_server_fails_closed_with_503(
    kube: Kube, make_cortex: MakeCortex, migrated_pg15_dsn: str, tmp_path: Path,
) -> None:
    config = yaml.safe_load(kube.kubeconfig.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = "https://127.0.0.1:1"
    gone = tmp_path / "kubeconfig"
    gone.write_text(yaml.safe_dump(config))
    client = await make_cortex(migrated_pg15_dsn, migrated=False,
                               auth=KubernetesAuth(client_review(kubeconfig=gone)))
    reply = await client.call("GET", "/v1/capabilities", agent=None,
                              headers={"Authorization": "Bearer some.jwt.value"})
    assert reply.status == 503 and reply.body["error"]["code"] == "not_ready"
    assert "some.jwt.value" not in reply.text


#: A kubeconfig's file fields (section, key).
FILE_FIELDS = (("cluster", "certificate-authority"), ("user", "client-certificate"),
               ("user", "client-key"))


def reshaped_kubeconfigs(kubeconfig: Path, directory: Path) -> list[Path]:
    """``kubeconfig`` rewritten with its certificates inline as base64, and with them as
    files beside it named by relative paths."""
    written = []
    for shape in ("inline", "relative"):
        config = yaml.safe_load(kubeconfig.read_text())
        for section, key in FILE_FIELDS:
            entry = config[f"{section}s"][0][section]
            source = Path(entry.pop(key))
            if shape == "inline":
                entry[f"{key}-data"] = base64.b64encode(source.read_bytes()).decode()
            else:
                shutil.copy(source, directory / source.name)
                entry[key] = source.name
        path = directory / f"{shape}.kubeconfig"
        path.write_text(yaml.safe_dump(config))
        written.append(path)
    return written


async def test_a_kubeconfig_with_embedded_certificates_or_relative_paths_works(
    kube: Kube, kube_namespace: str, tmp_path: Path,
) -> None:
    """The kubeconfig shapes other tools write: certificates inline as base64 (kind,
    minikube, cloud providers) or as files next to the kubeconfig; both review a token."""
    kube.kubectl("-n", kube_namespace, "create", "serviceaccount", "indexer")
    token = kube.kubectl("-n", kube_namespace, "create", "token", "indexer").stdout.strip()
    for path in reshaped_kubeconfigs(kube.kubeconfig, tmp_path):
        review = client_review(kubeconfig=path)
        assert await review(token) == (True, f"system:serviceaccount:{kube_namespace}:indexer")
