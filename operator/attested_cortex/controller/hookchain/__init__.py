"""HookChain: validated as the cortex server will load it; the verdict and the hooks in
force go to status, which the MemoryCortex controller renders into the hook file and
sidecars. An invalid chain keeps its last accepted hooks in force (``acceptedHooks``).
Called by the work queue (:mod:`attested_cortex.controller.registry`).
"""

from __future__ import annotations

from attested_cortex.builders.conditions import Observation, cortex_found, ready
from attested_cortex.builders.hookfiles import validate_chains
from attested_cortex.builders.inputs import InvalidSpecError, parse_chain
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import report_unparsable, write_status

KIND = "HookChain"


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a HookChain."""
    body = rt.views.get(KIND, key.namespace, key.name)
    if body is None:
        return None
    status = body.get("status") or {}
    try:
        chain = parse_chain(body)
    except InvalidSpecError as exc:
        await report_unparsable(rt.writer, kind=KIND, body=body, type_="Accepted",
                                reason="InvalidSpec", message=str(exc))
        return None
    cortex = chain.spec.cortex_ref.name
    siblings = []
    for other in rt.views.of_cortex(KIND, key.namespace, cortex):
        try:
            siblings.append(parse_chain(other))
        except InvalidSpecError:
            continue
    problem = validate_chains(siblings).get(chain.meta.name, None)
    found = rt.views.get("MemoryCortex", key.namespace, cortex) is not None
    accepted = Observation.of("Accepted", problem is None,
                              "Valid" if problem is None else "InvalidHook",
                              problem or f"{len(chain.spec.hooks)} hooks valid")
    located = cortex_found(cortex, found)
    fields = {}
    if problem is None:
        hooks = [h.model_dump(by_alias=True, mode="json", exclude_none=True)
                 for h in chain.spec.hooks]
        fields = {"acceptedHooks": hooks, "hookCount": len(hooks)}
    parts = [accepted, located]
    await write_status(rt.writer, kind=KIND, meta=chain.meta, current=status,
                       observed=[*parts, ready(parts, ready_reason="HooksInForce",
                                               ready_message="hooks rendered for the cortex")],
                       fields=fields)
    return None
