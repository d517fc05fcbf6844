"""The hook payloads of the spoke-memory family (ADR 0067), for :class:`.spoke_dispatch.SpokeCall`.

Every mutating op fires ``pre_spoke_write`` / ``post_spoke_write`` with ``{op, space_id,
principal, request}`` (the post- event adds the receipt); ``memory.recall`` fires the native
``pre_recall`` / ``post_recall`` and ``memory.records.list`` the native ``pre_search`` /
``post_search``, their payloads shaped as the native ones (``namespace`` is the space, each
hit a memory as the API returns it) with the family's fields beside them, so a hook written
for native reads holds for the family's. A Modify is taken back through the op's request
model (:func:`.pipeline.hooking.revalidate`: 400 ``hook_invalid_modify`` for what a client
could not send) and, since the pipeline recomputes the target, re-scoped and re-authorized
in the (possibly new) space. Pure; the pipeline fires them.
"""

from __future__ import annotations

from typing import Any, Final

from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.events import EventName
from attested_cortex.hooks.payloads import payload
from attested_cortex.namespaces import parse_namespace
from attested_cortex.service.pipeline.hooking import revalidate
from attested_cortex.service.resources.spoke.views import wire
from attested_cortex.spoke import requests as rq
from attested_cortex.spoke.models import RetainedRecord, Wire
from attested_cortex.spoke.operations import MemoryOp

#: What a read hook may change besides ``namespace`` (the space): the family's own fields.
_READ_FIELDS: Final = {"memory.recall": ("query", "limit", "budget_tokens", "subject_id",
                                         "selection", "provenance"),
                       "memory.records.list": ("limit", "subject_id", "selection",
                                               "provenance")}


def pre_payload(declared: MemoryOp, req: Wire, principal: str,
                event: EventName) -> dict[str, Any]:
    """The payload of ``event`` before ``req`` runs."""
    asked = req.model_dump(mode="json")
    if event == "pre_spoke_write":
        return payload(event, op=declared.name, space_id=asked["space_id"],
                       principal=principal, request=asked)
    return payload(event, **_read_view(declared, asked))


def _read_view(declared: MemoryOp, asked: dict[str, Any]) -> dict[str, Any]:
    family = {k: asked[k] for k in _READ_FIELDS[declared.name]}
    if declared.name == "memory.recall":
        return {"op": declared.name, **family, "namespace": asked["space_id"]}
    return {"op": declared.name, **family, "query": None, "namespace": asked["space_id"],
            "cursor": asked["cursor"]}


def modified(declared: MemoryOp, req: Wire, event: EventName,
             changed: dict[str, Any]) -> Wire:
    """``req`` as a pre- hook left it (the same object when the hook changed nothing)."""
    asked = req.model_dump(mode="json")
    if event == "pre_spoke_write":
        if changed.get("op", declared.name) != declared.name:
            raise _invalid("a hook may not change the op of a spoke-memory request")
        given = changed.get("request")
        if given == asked:
            return req
        if not isinstance(given, dict):
            raise _invalid("a hook's Modify of a spoke-memory write carries its request")
        return _checked(declared, given)
    wanted = {**asked, **{k: changed[k] for k in _READ_FIELDS[declared.name] if k in changed}}
    wanted["space_id"] = changed.get("namespace", asked["space_id"])
    return req if wanted == asked else _checked(declared, wanted)


def _checked(declared: MemoryOp, request: dict[str, Any]) -> Wire:
    made = revalidate(declared.request, request)
    if isinstance(made, rq.InSpace):
        try:
            parse_namespace(made.space_id, field="request.space_id")
        except InvalidInputError as exc:
            raise _invalid(f"a hook moved the request to an invalid space: {exc}") from exc
    return made


def _invalid(message: str) -> InvalidInputError:
    return InvalidInputError(message, code="hook_invalid_modify", errors=[message])


def post_payload(declared: MemoryOp, req: Wire, principal: str, event: EventName,
                 result: Wire) -> dict[str, Any]:
    """The payload of ``event`` after ``req`` answered ``result``."""
    asked = req.model_dump(mode="json")
    if event == "post_spoke_write":
        return payload(event, op=declared.name, space_id=asked["space_id"],
                       principal=principal, request=asked, receipt=wire(result))
    view = _read_view(declared, asked)
    if isinstance(result, rq.RecallAnswer):
        return payload(event, **view, truncated=result.truncated, results=[
            {**memory_of(hit.record), "score": hit.score} for hit in result.results])
    assert isinstance(result, rq.RecordPage)
    return payload(event, **view, truncated=result.next is not None,
                   total_authorized=result.total_authorized,
                   results=[memory_of(record) for record in result.records])


def memory_of(record: RetainedRecord) -> dict[str, Any]:
    """A live record as the native API shows its memory, with the family's fields beside."""
    found = wire(record)
    return {"id": found["record_id"], "namespace": found["space_id"], "title": "",
            "content": found["content"]["text"], "tags": [], "metadata": {},
            "author": found["provenance"]["captured_by"], "revision": found["revision"],
            "created_at": found["created_at"], "updated_at": found["updated_at"],
            "deleted": found["tombstone"], "deleted_at": None,
            "subject_id": found["subject_id"], "kind": found["kind"],
            "placement": found["placement"], "provenance": found["provenance"]}
