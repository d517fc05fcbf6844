"""``/v1/federation``: the inbound side of federation (issue 42, docs/federation.md).

* ``POST /v1/federation/changes``: a peer's batch; the caller is the peer its TLS client
  certificate proves (:mod:`..federating`), named in ``X-Cortex-Peer``; answered after
  every change it acknowledges committed.
* ``GET /v1/federation/keyring``: this cortex's agent keys and their windows, signed by its
  identity key (public: peers verify with the identity key they were configured with).
* ``GET /v1/federation/quarantine``: the changes held apart (``audit.read``).
* ``GET /v1/memories/{id}/provenance``: a federated memory's ``peer_attested`` provenance.

Without ``federation`` configured the first two answer 404.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from attested_cortex.errors import NotFoundError
from attested_cortex.server.body import read_model, read_query
from attested_cortex.server.federating import PEER_HEADER, authenticate_peer
from attested_cortex.server.openapi import COMMON_ERRORS, Operation, Param, params_of
from attested_cortex.server.routes.memories import path_uuid
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import federation
from attested_cortex.service.resources.federation_state import Federation
from attested_cortex.service.resources.federation_wire import (
    BatchResult,
    ChangeBatch,
    ProvenanceOut,
    PublishedKeyring,
    QuarantineOut,
    QuarantineQuery,
)
from attested_cortex.service.resources.queries import MemoryRef

routes = web.RouteTableDef()
CHANGES_PATH = "/v1/federation/changes"
KEYRING_PATH = "/v1/federation/keyring"


@dataclass(frozen=True)
class Served:
    """The federation a server runs, and each peer's CA bundle text."""

    federation: Federation
    bundles: dict[str, str]
    #: Told when a peer's batch arrives (the outbound sender retries that peer at once).
    heard_from: Callable[[str], None] | None = None


FEDERATION_KEY = web.AppKey("cortex_federation", Served)


def _served(request: web.Request) -> Served:
    served = request.app.get(FEDERATION_KEY)
    if served is None:
        raise NotFoundError("federation is not configured on this cortex",
                            code="federation_off")
    return served


def _client_certificate(request: web.Request) -> bytes | None:
    tls = request.transport.get_extra_info("ssl_object") if request.transport else None
    if not isinstance(tls, ssl.SSLObject):
        return None
    return tls.getpeercert(binary_form=True)


@routes.post(CHANGES_PATH)
async def receive_changes(request: web.Request) -> web.Response:
    """A peer's changes, each stored, refused or quarantined; one result per change."""
    served, svc = _served(request), state(request).services
    peer = authenticate_peer(served.federation, served.bundles,
                             request.headers.get(PEER_HEADER), _client_certificate(request))
    if served.heard_from is not None:
        served.heard_from(peer.name)
    batch = await read_model(request, ChangeBatch, max_bytes=svc.limits.max_import_bytes)
    answer = await federation.receive(svc, served.federation, peer, batch)
    return web.json_response(answer.model_dump(mode="json"))


@routes.get(KEYRING_PATH)
async def published_keyring(request: web.Request) -> web.Response:
    """This cortex's agent keyring, signed by its identity key."""
    served = _served(request)
    document: dict[str, Any] = federation.published_keyring(
        state(request).services, served.federation)
    return web.json_response(document, headers={"Cache-Control": "no-store"})


@routes.get("/v1/federation/quarantine")
async def list_quarantine(request: web.Request) -> web.Response:
    """The quarantined changes, oldest first."""
    query = read_query(request, QuarantineQuery)
    return web.json_response(await federation.quarantine(
        state(request).services, caller(request), after=query.after, limit=query.limit))


@routes.get("/v1/memories/{id}/provenance")
async def memory_provenance(request: web.Request) -> web.Response:
    """Whether the memory came from a federation peer, and on whose signature."""
    return web.json_response(await federation.provenance(
        state(request).services, caller(request), path_uuid(request)))


operations = [
    Operation("POST", CHANGES_PATH, "A federation peer's changes (mTLS client certificate of "
              "the peer named in X-Cortex-Peer); one ACK per change", 200, BatchResult,
              request=ChangeBatch, public=True,
              params=[Param(PEER_HEADER, "header", {"type": "string", "maxLength": 63})],
              errors=(400, 401, 403, 404, 413, 415)),
    Operation("GET", KEYRING_PATH, "This cortex's agent keys and windows, signed by its "
              "federation identity key", 200, PublishedKeyring, public=True, errors=(404,)),
    Operation("GET", "/v1/federation/quarantine", "Federated changes held apart (unsigned "
              "or failing verification); never recalled", 200, QuarantineOut,
              params=params_of(QuarantineQuery, "query"), errors=(*COMMON_ERRORS,)),
    Operation("GET", "/v1/memories/{id}/provenance", "Where a memory came from: a federation "
              "peer (peer_attested: origin cortex, revision, signing agent and key) or here",
              200, ProvenanceOut,
              params=params_of(MemoryRef, "path"), errors=(*COMMON_ERRORS, 404)),
]
