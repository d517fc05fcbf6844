"""The opening every satellite pass shares: the body from the views, parsed, and the cortex
it names. Called by the HookChain and PermissionRule controllers (and usable by any kind
with ``spec.cortexRef``).

A satellite that is gone ends its pass silently (its children go with it by owner
reference); one whose spec the models refuse gets its failed condition and ``Ready`` once
(:func:`~attested_cortex.controller.statuses.report_unparsable`) and nothing else; otherwise
the pass goes on from an :class:`Opened`: the parsed resource, its current status, the
cortex's body (None while it does not exist) and ``CortexFound``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from attested_cortex.builders.conditions import Observation, cortex_found
from attested_cortex.builders.inputs import InvalidSpecError, Resource
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime, Views
from attested_cortex.controller.statuses import report_unparsable

Object = dict[str, Any]
T = TypeVar("T", bound=Resource[Any, Any])
ParseFn = Callable[[Mapping[str, Any]], T]


@dataclass(frozen=True)
class Opened(Generic[T]):
    """A satellite that parsed, and what its pass starts from."""

    resource: T
    status: Mapping[str, Any]
    cortex_name: str
    #: The named MemoryCortex's body, or None while it does not exist.
    cortex: Object | None
    #: ``CortexFound``, every satellite's second condition.
    located: Observation


async def open_satellite(rt: Runtime, key: Key, parse: ParseFn[T], *, kind: str,
                         invalid_type: str, invalid_reason: str) -> Opened[T] | None:
    """The satellite behind ``key``, or None when the pass has nothing more to do (gone, or
    unparsable and reported as ``invalid_type``/``invalid_reason``)."""
    body = rt.views.get(kind, key.namespace, key.name)
    if body is None:
        return None
    try:
        resource = parse(body)
    except InvalidSpecError as exc:
        await report_unparsable(rt.writer, kind=kind, body=body, type_=invalid_type,
                                reason=invalid_reason, message=str(exc))
        return None
    name = str(resource.spec.cortex_ref.name)
    cortex = rt.views.get("MemoryCortex", key.namespace, name)
    return Opened(resource=resource, status=body.get("status") or {}, cortex_name=name,
                  cortex=cortex, located=cortex_found(name, cortex is not None))


def siblings(views: Views, parse: ParseFn[T], *, kind: str, namespace: str,
             cortex: str) -> list[T]:
    """Every satellite of ``kind`` naming ``cortex`` that parses (one that does not is its
    own pass's to report), for the checks decided across them."""
    parsed = []
    for body in views.of_cortex(kind, namespace, cortex):
        try:
            parsed.append(parse(body))
        except InvalidSpecError:
            continue
    return parsed
