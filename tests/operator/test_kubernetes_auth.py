"""``--auth kubernetes`` against the real API server: a service-account token is reviewed
(TokenReview) and becomes the agent ``k8s:<namespace>/<name>``; anything else is 401."""

import pytest

from attested_cortex.server.auth_kubernetes import KubernetesAuth, client_review
from tests.support.cortex import MakeCortex
from tests.support.kube import Kube

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
