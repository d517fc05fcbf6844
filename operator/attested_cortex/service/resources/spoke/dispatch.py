"""``POST /v1/spoke/memory``: one callable for the whole spoke-memory family (seed 001).

:func:`dispatch` decodes ``{op, request, idempotency_key?}``: an unknown op is 400
``unknown_op``; an op whose flag the request did not negotiate is 400 ``capability_missing``
(ADR 0061), before its request is even parsed; then the request is validated against the
op's declared type (:mod:`attested_cortex.spoke.operations`) and run through the pipeline
(:func:`..pipeline.running.run`: scope on the space's namespace, rules, hooks (ADR 0067,
:mod:`.hooks`), quotas, audit) as
the op's :class:`SpokeCall`, whose execute is the family handler (:mod:`.ops`), which
adds the family's grant check. A declared op with no handler yet is 501 ``not_served``.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from pydantic import ValidationError

from attested_cortex.errors import InvalidInputError, NotServedError
from attested_cortex.hooks.events import EventName
from attested_cortex.jsonbounds import validation_error
from attested_cortex.namespaces import parse_namespace
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.pipeline.operations import SPOKE_MEMORY, OperationSpec
from attested_cortex.service.pipeline.running import Call, Target, run
from attested_cortex.service.resources.spoke import capture as capture
from attested_cortex.service.resources.spoke import hooks as hooks
from attested_cortex.service.resources.spoke import ops as ops
from attested_cortex.service.resources.spoke import profiles as profiles
from attested_cortex.service.resources.spoke import reading as reading
from attested_cortex.service.resources.spoke import reflections as reflections
from attested_cortex.service.resources.spoke import transfer as transfer
from attested_cortex.service.resources.spoke.ops import Handler
from attested_cortex.service.resources.spoke.views import wire
from attested_cortex.spoke.models import Flag, Wire
from attested_cortex.spoke.operations import MEMORY_OPS, MemoryOp
from attested_cortex.spoke.requests import InSpace

#: The requests that may carry a cognition_filter (it needs spoke-cognition, not served).
_FILTERED: Final = frozenset({"memory.recall", "memory.records.list",
                              "memory.reflections.state", "memory.reflections.list",
                              "memory.reflections.generate"})

#: The served handlers by op name; a declared op missing here answers 501 ``not_served``.
HANDLERS: Final[dict[str, Handler]] = {
    "memory.describe": ops.describe,
    "memory.spaces.list": ops.spaces_list,
    "memory.spaces.freeze": ops.freeze,
    "memory.spaces.unfreeze": ops.unfreeze,
    "memory.subjects.ensure": ops.subjects_ensure,
    "memory.subjects.get": ops.subjects_get,
    "memory.subjects.fence": ops.subjects_fence,
    "memory.grants.list": ops.grants_list,
    "memory.grants.grant": ops.grants_grant,
    "memory.grants.revoke": ops.grants_revoke,
    "memory.capture": capture.capture,
    "memory.candidates.list": capture.candidates_list,
    "memory.candidates.get": capture.candidates_get,
    "memory.candidates.dismiss": capture.candidates_dismiss,
    "memory.candidates.review": capture.candidates_review,
    "memory.records.create": ops.records_create,
    "memory.records.get": ops.records_get,
    "memory.records.update": ops.records_update,
    "memory.records.delete": ops.records_delete,
    "memory.records.list": reading.records_list,
    "memory.records.promote": reading.records_promote,
    "memory.recall": reading.recall,
    "memory.profile.get": profiles.profile_get,
    "memory.profile.update": profiles.profile_update,
    "memory.receipts.get": ops.receipts_get,
    "memory.reflections.state": reflections.state,
    "memory.reflections.list": reflections.listed,
    "memory.reflections.generate": reflections.generate,
    "memory.exports.create": transfer.exports_create,
    "memory.exports.get": transfer.exports_get,
    "memory.imports.stage": transfer.imports_stage,
    "memory.imports.activate": transfer.imports_activate,
    "memory.imports.discard": transfer.imports_discard,
}


@dataclass
class SpokeCall(Call[Wire]):
    """One family op through the pipeline; subclassed once per op (its ``spec``)."""

    op: MemoryOp
    req: Wire
    handler: Handler
    key: str | None
    principal: str

    async def target(self, svc: Services, caller: Caller) -> Target:
        if isinstance(self.req, InSpace):
            return Target((self.req.space_id,), caller.agent_id)
        return Target()

    async def execute(self, svc: Services, caller: Caller) -> Wire:
        return await self.handler(svc, caller, self.req, self.key)

    def pre_payload(self, event: EventName) -> dict[str, Any]:
        return hooks.pre_payload(self.op, self.req, self.principal, event)

    def modified(self, event: EventName, payload: dict[str, Any]) -> None:
        self.req = hooks.modified(self.op, self.req, event, payload)

    def post_payload(self, event: EventName, result: Wire) -> dict[str, Any]:
        return hooks.post_payload(self.op, self.req, self.principal, event, result)

    def request(self) -> dict[str, Any]:
        found: dict[str, Any] = {"op": self.op.name, **self.req.model_dump(mode="json")}
        return found


def _call_class(spec: OperationSpec) -> type[SpokeCall]:
    name = "Spoke" + "".join(p.title() for p in spec.name.split(".")[2:]) + "Call"
    made: type[SpokeCall] = type(name, (SpokeCall,), {"spec": spec})
    return made


#: The Call class of each op.
CALLS: Final[dict[str, type[SpokeCall]]] = {
    name: _call_class(spec) for name, spec in SPOKE_MEMORY.items()}


async def dispatch(svc: Services, caller: Caller, *, op: str, request: dict[str, Any],
                   key: str | None, negotiated: Collection[Flag]) -> dict[str, Any]:
    """Run one family op for ``caller``; its answer as JSON."""
    declared = MEMORY_OPS.get(op)
    if declared is None:
        raise InvalidInputError(f"op {op!r} is not a memory.* operation of the family",
                                code="unknown_op", field="op")
    if declared.flag not in negotiated:
        raise InvalidInputError(
            f"{op} needs the {declared.flag} capability, which this request did not "
            "negotiate (X-Spoke-Capabilities)", code="capability_missing",
            required=declared.flag, negotiated=sorted(negotiated))
    req = _decode(declared, request)
    handler = HANDLERS.get(op)
    if handler is None:
        raise NotServedError(f"{op} is declared but not served by this build yet "
                             "(docs/spoke-memory.md)", op=op)
    answer = await run(svc, caller, CALLS[op](declared, req, handler, key, caller.agent_id))
    return wire(answer)


def _decode(declared: MemoryOp, request: dict[str, Any]) -> Wire:
    if declared.name in _FILTERED and request.get("cognition_filter") is not None:
        raise InvalidInputError("cognition_filter needs spoke-cognition, which this cortex "
                                "does not serve", field="request.cognition_filter",
                                reason="unsupported_cognition_requirement")
    try:
        req = declared.request.model_validate(request)
    except ValidationError as exc:
        refused = validation_error(exc)
        if any("cognition" in str(p["field"]) for p in refused.details["problems"]):
            refused.details["reason"] = "invalid_cognition_record"
        raise refused from exc
    if isinstance(req, InSpace):
        parse_namespace(req.space_id, field="request.space_id")
    return req
