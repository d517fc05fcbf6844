"""The TokenReview authenticator's own rules, with a stand-in review function (the real
API server is exercised in tests/operator/test_kubernetes_auth.py)."""

import pytest

from attested_cortex.errors import UnauthenticatedError
from attested_cortex.server.auth_kubernetes import KubernetesAuth, agent_id_for


def test_service_accounts_map_to_agent_ids() -> None:
    assert agent_id_for("system:serviceaccount:team-a:planner") == "k8s:team-a/planner"


@pytest.mark.parametrize("user", ["alice", "system:node:n1", "system:serviceaccount:",
                                  "system:serviceaccount:ns:"])
def test_other_users_are_refused(user: str) -> None:
    with pytest.raises(UnauthenticatedError):
        agent_id_for(user)


async def test_reviews_are_cached_by_token_hash_and_failures_refused() -> None:
    asked: list[str] = []

    async def review(token: str) -> tuple[bool, str]:
        asked.append(token)
        return token == "good", "system:serviceaccount:ns:sa"

    auth = KubernetesAuth(review)
    for _ in range(3):
        caller = await auth.authenticate({"Authorization": "Bearer good"})
        assert caller.agent_id == "k8s:ns/sa" and caller.auth == "kubernetes"
    assert asked == ["good"]
    assert all(b"good" not in key for key in auth._cache)
    with pytest.raises(UnauthenticatedError):
        await auth.authenticate({"Authorization": "Bearer bad"})
    with pytest.raises(UnauthenticatedError):
        await auth.authenticate({})
