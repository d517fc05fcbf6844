"""``GET /v1/audit/verify``: the signed_events chain, verified end to end; the audit tree's
``GET /v1/audit/checkpoint``, ``/proof?seq=`` and ``/consistency?from=&to=`` (ADR 0099)."""

from __future__ import annotations

from aiohttp import web

from attested_cortex.server.body import read_query
from attested_cortex.server.openapi import COMMON_ERRORS, Operation, params_of
from attested_cortex.server.responses import (
    AuditCheckpointOut,
    AuditConsistencyOut,
    AuditProofOut,
    AuditVerifyOut,
)
from attested_cortex.server.state import caller, state
from attested_cortex.service.resources import audit_proofs, auditing
from attested_cortex.service.resources.queries import AuditQuery, ConsistencyQuery, ProofQuery

routes = web.RouteTableDef()


@routes.get("/v1/audit/verify")
async def audit_verify(request: web.Request) -> web.Response:
    """``{ok, events, first_bad_sequence, ...}`` for the whole chain; ``?deep=true`` adds
    ``deep``: every memory and link row checked against its latest write record."""
    query = read_query(request, AuditQuery)
    report = await auditing.verify(state(request).services, caller(request), deep=query.deep)
    return web.json_response(report)


@routes.get("/v1/audit/checkpoint")
async def audit_checkpoint(request: web.Request) -> web.Response:
    """The latest signed checkpoint as its C2SP signed note (``text/plain``); asked with
    ``Accept: application/json``, the note with its size, root, origin and log key."""
    view = await audit_proofs.checkpoint(state(request).services, caller(request))
    if "application/json" in request.headers.get("Accept", ""):
        return web.json_response(view)
    return web.Response(text=view["note"], content_type="text/plain",
                        headers={"Cache-Control": "no-store"})


@routes.get("/v1/audit/proof")
async def audit_proof(request: web.Request) -> web.Response:
    """The inclusion proof of event ``seq`` in the tree of ``size`` (the latest checkpoint's)."""
    query = read_query(request, ProofQuery)
    return web.json_response(await audit_proofs.proof(state(request).services,
                                                      caller(request), query))


@routes.get("/v1/audit/consistency")
async def audit_consistency(request: web.Request) -> web.Response:
    """The RFC 9162 consistency proof from tree size ``from`` to ``to``."""
    query = read_query(request, ConsistencyQuery)
    return web.json_response(await audit_proofs.consistency(state(request).services,
                                                            caller(request), query))


operations = [
    Operation("GET", "/v1/audit/verify", "Verify the whole signed_events chain (and, with "
              "deep=true, every row against its write record)", 200, AuditVerifyOut,
              params=params_of(AuditQuery, "query")),
    Operation("GET", "/v1/audit/checkpoint", "The latest signed checkpoint of the audit tree "
              "(C2SP tlog-checkpoint note; JSON with Accept: application/json)", 200,
              AuditCheckpointOut, errors=(*COMMON_ERRORS, 404)),
    Operation("GET", "/v1/audit/proof", "An event's RFC 9162 inclusion proof in a "
              "checkpointed tree", 200, AuditProofOut, params=params_of(ProofQuery, "query"),
              errors=(*COMMON_ERRORS, 404)),
    Operation("GET", "/v1/audit/consistency", "The RFC 9162 consistency proof between two "
              "checkpointed tree sizes", 200, AuditConsistencyOut,
              params=params_of(ConsistencyQuery, "query"), errors=(*COMMON_ERRORS, 404)),
]
