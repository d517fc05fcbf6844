"""``--auth kubernetes``: a service-account token is reviewed by the API server (TokenReview).

The agent id and scopes of ``system:serviceaccount:<ns>:<name>`` come from the config's
``agents`` mapping (rendered by the operator from AgentIdentity objects); an unmapped service
account is ``k8s:<ns>/<name>`` (the default ``agentId`` of an AgentIdentity bound to it) with
the default scopes; its trust tier from the mapping's ``trust_tier`` (else the configured
default). Any other kind of user is refused. An API server that cannot be reached
or answers an error fails closed: 503, never a guess. Positive answers are cached for a
short time under the SHA-256 of the token (never the token itself), so a busy agent costs
one review per minute, not one per request.
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attested_cortex.errors import InvalidInputError, NotReadyError, UnauthenticatedError
from attested_cortex.kubeclient import (
    ApiError,
    ConnectionConfigError,
    KubeApi,
    from_kubeconfig,
    in_cluster,
)
from attested_cortex.policy.scopes import DEFAULT, ScopeSet
from attested_cortex.policy.tiers import DEFAULT_TIER, TrustTier
from attested_cortex.server.auth import bearer_token, parse_agent_id
from attested_cortex.service.pipeline.context import Caller
from attested_cortex.types import AgentId

SA_PREFIX = "system:serviceaccount:"
REVIEW_TIMEOUT_S = 5.0
REVIEW_PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
#: Who the API server says a token belongs to: (authenticated, username).
Review = Callable[[str], Awaitable[tuple[bool, str]]]


#: ``<namespace>/<service account>`` -> (agent id, scopes).
AgentMap = Mapping[str, tuple[AgentId, ScopeSet]]


def service_account(username: str) -> str:
    """``system:serviceaccount:ns:name`` -> ``ns/name``; other users are refused."""
    namespace, _, name = username.removeprefix(SA_PREFIX).partition(":")
    if not username.startswith(SA_PREFIX) or not namespace or not name:
        raise UnauthenticatedError("only Kubernetes service accounts may call this server")
    return f"{namespace}/{name}"


def agent_id_for(username: str) -> AgentId:
    """``system:serviceaccount:ns:name`` -> ``k8s:ns/name``; other users are refused."""
    return parse_agent_id(f"k8s:{service_account(username)}")


def identity_for(username: str, agents: AgentMap) -> tuple[AgentId, ScopeSet]:
    """The mapped agent and scopes of a service account, or the defaults."""
    mapped = agents.get(service_account(username))
    return mapped if mapped is not None else (agent_id_for(username), DEFAULT)


@dataclass
class KubernetesAuth:
    """Bearer tokens reviewed by the API server, with a short positive cache."""

    review: Review
    agents: AgentMap = field(default_factory=dict)
    #: ``<namespace>/<service account>`` -> trust tier; absent: ``default_tier``.
    tiers: Mapping[str, TrustTier] = field(default_factory=dict)
    default_tier: TrustTier = DEFAULT_TIER
    ttl_s: float = 60.0
    max_entries: int = 10_000
    mode: str = "kubernetes"
    _cache: dict[bytes, tuple[float, Caller]] = field(default_factory=dict)

    async def authenticate(self, headers: Mapping[str, str]) -> Caller:
        token = bearer_token(headers)
        digest = hashlib.sha256(token.encode()).digest()
        cached = self._cache.get(digest)
        now = time.monotonic()
        if cached is not None and cached[0] > now:
            return cached[1]
        authenticated, username = await self.review(token)
        if not authenticated:
            raise UnauthenticatedError("the API server did not accept this token")
        agent_id, scopes = identity_for(username, self.agents)
        tier = self.tiers.get(service_account(username), self.default_tier)
        caller = Caller(agent_id, self.mode, scopes, tier=tier)
        if len(self._cache) >= self.max_entries:
            self._cache.clear()
        self._cache[digest] = (now + self.ttl_s, caller)
        return caller


def client_review(*, kubeconfig: Path | None, audiences: Sequence[str] = ()) -> Review:
    """A :data:`Review` through :class:`~attested_cortex.kubeclient.KubeApi`: in-cluster
    credentials, or ``kubeconfig`` when given (outside a cluster, e.g. ``make run`` and the
    tests)."""
    try:
        connection = from_kubeconfig(kubeconfig) if kubeconfig is not None else in_cluster()
        api = KubeApi(connection)
    except (ConnectionConfigError, OSError, ssl.SSLError, ValueError) as exc:
        raise InvalidInputError(
            f"--auth kubernetes needs in-cluster credentials or a readable --kubeconfig: {exc}",
            field="kubeconfig",
        ) from exc
    spec: dict[str, Any] = {"audiences": list(audiences)} if audiences else {}

    async def review(token: str) -> tuple[bool, str]:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {**spec, "token": token}}
        try:
            # One deadline for the whole answer: an API server that sends one byte a second
            # would otherwise hold the request for ever.
            async with asyncio.timeout(REVIEW_TIMEOUT_S + 1):
                answer = await api.request("POST", REVIEW_PATH, body=body)
        except TimeoutError:
            raise NotReadyError("the Kubernetes API server did not answer the TokenReview "
                                f"within {REVIEW_TIMEOUT_S + 1:.0f} s") from None
        except ApiError as exc:
            raise _review_failed(exc) from None
        status = answer.get("status") or {}
        user = (status.get("user") or {}).get("username") or ""
        return bool(status.get("authenticated")), str(user)

    return review


def _review_failed(exc: ApiError) -> NotReadyError:
    """Fail closed, 503, and never cache: the message names the status or the kind of
    network failure, never the request (it holds the token)."""
    if exc.status:
        return NotReadyError(f"TokenReview failed ({exc.status}); check the server's "
                             "RBAC (tokenreviews: create)")
    cause = type(exc.__cause__).__name__ if exc.__cause__ is not None else "no answer"
    return NotReadyError("the Kubernetes API server is unreachable; cannot review the token "
                         f"({cause})")
