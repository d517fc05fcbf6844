"""``--auth kubernetes`` on /mcp against the real API server: a service-account token (what
an in-cluster agent sends) is reviewed and becomes the tool caller, its scopes hold, and a
forged token never reaches a tool."""

import pytest
from hack.support.kube import Kube

from attested_cortex.server.auth_kubernetes import KubernetesAuth, client_review
from attested_cortex.server.configuring import agent_map
from attested_cortex.server.settings import ServerSettings
from tests.mcp.conftest import mcp_client
from tests.mcp.test_mcp_http import error, ok
from tests.support.cortex import MakeCortex

pytestmark = pytest.mark.kube


async def test_service_account_tokens_call_tools_with_their_scopes(
    kube: Kube, kube_namespace: str, make_cortex: MakeCortex, migrated_pg15_dsn: str,
) -> None:
    for name in ("planner", "reader"):
        kube.kubectl("-n", kube_namespace, "create", "serviceaccount", name)
    planner, reader = (kube.kubectl("-n", kube_namespace, "create", "token",
                                    name).stdout.strip() for name in ("planner", "reader"))
    settings = ServerSettings(agents=[{
        "service_account": f"{kube_namespace}/reader", "agent_id": "team:reader",
        "scopes": ["memory.read:shared/**"]}])
    auth = KubernetesAuth(client_review(kubeconfig=kube.kubeconfig), agents=agent_map(settings))
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, auth=auth)
    async with mcp_client(cortex, headers={"Authorization": f"Bearer {planner}"}) as client:
        stored = ok(await client.call_tool("memory_store", {"namespace": "shared/x",
                                                            "content": "c"}))
    assert stored["author"] == f"k8s:{kube_namespace}/planner"
    async with mcp_client(cortex, headers={"Authorization": f"Bearer {reader}"}) as client:
        denied = error(await client.call_tool("memory_store", {"namespace": "shared/x",
                                                               "content": "c"}))
        found = ok(await client.call_tool("memory_get", {"id": stored["id"]}))
    assert (denied["status"], denied["error"]["code"]) == (403, "scope_denied")
    assert found["id"] == stored["id"]
    forged = await cortex.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1,
                                                "method": "tools/list"}, agent=None,
                               headers={"Authorization": f"Bearer {planner[:-4]}AAAA"})
    assert forged.status == 401 and planner not in forged.text
