"""The outbound side of federation as the settings configure it (issue 42, ADR 0132): the
mTLS client that POSTs this cortex's changes to a peer, and the sender
(:mod:`attested_cortex.service.workers.federation_sending`) built with it and with the
encoder of :mod:`attested_cortex.service.resources.federation_outbound`. Called by
:mod:`.serving`, which starts the sender once the server listens.

Each peer gets one HTTP session with its own TLS context (:func:`.federating.client_tls`:
the peer's CA bundle verifies its server, our client certificate proves who we are) and
one connection; every request is bounded by ``request_timeout_seconds``. A batch is checked
by the one wire model before it leaves, and the answer by the model of the answer: one that
does not parse, or names another cortex, counts as no answer.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from attested_cortex.attest.keys import AgentKey
from attested_cortex.errors import NotReadyError
from attested_cortex.server.federating import PEER_HEADER, client_tls
from attested_cortex.server.settings import FederationSettings
from attested_cortex.service.pipeline.context import Services
from attested_cortex.service.resources.federation_outbound import encoder
from attested_cortex.service.resources.federation_wire import BatchResult, ChangeBatch
from attested_cortex.service.workers.federation_sending import (
    BATCH_REFUSED,
    Ack,
    FederationSender,
    SendSettings,
)


def wire_body(changes: list[dict[str, Any]]) -> str:
    """The JSON body of a batch: ``signer`` is written only when it is not the default
    ``agent``, so a receiver older than ADR 0138 still reads every agent-signed batch and
    refuses (400) only one that holds an origin-signed delete or invalidation."""
    batch = ChangeBatch.model_validate({"changes": changes})
    return batch.model_dump_json(exclude={"changes": {
        i: {"signer"} for i, change in enumerate(batch.changes) if change.signer == "agent"}})


class PeerClient:
    """One HTTP session per peer, made on first use (in the running loop)."""

    def __init__(self, settings: FederationSettings, cortex_id: str) -> None:
        self._cortex_id = cortex_id
        self._peers = {p.name: p for p in settings.peers}
        self._contexts = {p.name: client_tls(settings, p) for p in settings.peers}
        self._timeout = aiohttp.ClientTimeout(total=settings.request_timeout_seconds)
        self._sessions: dict[str, aiohttp.ClientSession] = {}

    def _session(self, peer: str) -> aiohttp.ClientSession:
        session = self._sessions.get(peer)
        if session is None or session.closed:
            session = aiohttp.ClientSession(
                timeout=self._timeout,
                connector=aiohttp.TCPConnector(ssl=self._contexts[peer], limit=1))
            self._sessions[peer] = session
        return session

    async def post(self, peer: str, changes: list[dict[str, Any]]) -> list[Ack]:
        """POST ``changes`` to ``peer``; its per-change answers, in order."""
        body = wire_body(changes)
        url = f"{self._peers[peer].url.rstrip('/')}/v1/federation/changes"
        try:
            async with self._session(peer).post(
                    url, data=body, headers={PEER_HEADER: self._cortex_id,
                                             "Content-Type": "application/json"}) as answer:
                text = await answer.read()
                status = answer.status
        except aiohttp.ClientError as exc:
            raise NotReadyError(f"peer {peer} unreachable: {type(exc).__name__}",
                                code="peer_unreachable") from exc
        if status in (400, 413):
            raise NotReadyError(f"peer {peer} refused a batch of {len(changes)}: {status}",
                                code=BATCH_REFUSED)
        if status != 200:
            raise NotReadyError(f"peer {peer} answered {status}", code="peer_refused")
        result = BatchResult.model_validate_json(text)
        if result.cortex != peer:
            raise NotReadyError(f"peer {peer} answered as {result.cortex}",
                                code="peer_mismatch")
        return [Ack(r.seq, r.accepted, r.status) for r in result.results]

    async def aclose(self) -> None:
        """Close every session."""
        sessions, self._sessions = list(self._sessions.values()), {}
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)


def send_settings(settings: FederationSettings) -> SendSettings:
    """The sender's bounds and schedule from the ``federation`` settings."""
    return SendSettings(batch=settings.send_batch, retry_s=tuple(settings.retry_seconds),
                        backoff_max_s=settings.backoff_max_seconds,
                        change_ttl_s=settings.change_ttl_seconds,
                        poll_s=settings.poll_seconds)


def sender_from(settings: FederationSettings, cortex_id: str, services: Services,
                identity: AgentKey | None = None,
                ) -> tuple[FederationSender, PeerClient] | None:
    """The sender and its client; None when no peer has ``send`` patterns. ``identity``
    (the cortex's federation key) signs its deletes and invalidations (ADR 0138)."""
    peers = [p for p in settings.peers if p.send]
    if not peers:
        return None
    client = PeerClient(settings, cortex_id)
    encode = encoder(cortex_id, {p.name: p.send for p in peers}, services.sealer,
                     identity)
    sender = FederationSender(services.db, [p.name for p in peers], encode, client.post,
                              send_settings(settings), origin=cortex_id,
                              registry=services.metrics_registry)
    return sender, client
