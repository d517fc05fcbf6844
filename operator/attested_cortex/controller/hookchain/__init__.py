"""HookChain: validated as the cortex server will load it; the verdict and the hooks in
force go to status, which the MemoryCortex controller renders into the hook file and
sidecars. An invalid chain keeps its last accepted hooks in force (``acceptedHooks``).
``acceptedHooks`` are the hooks the operator renders; whether a serving pod runs them is
``InForce`` (builders/enforcement.py), read from the cortex's server Deployment, and Ready
is ``HooksInForce`` only then. The cortex's status changes when its rollout does, and that
change brings every chain of the cortex back here; while the hooks are not running the pass
also looks again every :data:`NOT_RUNNING_RETRY_S` (one read), since a rollout kwok or a
fast node finishes between two cortex passes changes no cortex status.
Called by the work queue (:mod:`attested_cortex.controller.registry`).
"""

from __future__ import annotations

from typing import Any

from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation, find, ready
from attested_cortex.builders.enforcement import in_force
from attested_cortex.builders.hookfiles import validate_chains
from attested_cortex.builders.inputs import Chain, parse_chain
from attested_cortex.controller import opening
from attested_cortex.controller.opening import open_satellite
from attested_cortex.controller.queueing import Key
from attested_cortex.controller.runtime import Runtime
from attested_cortex.controller.statuses import write_status

KIND = "HookChain"
NOT_RUNNING_RETRY_S = 10.0


async def _in_force(rt: Runtime, chain: Chain, cortex: dict[str, Any]) -> Observation:
    """InForce from the cortex's server Deployment and its ServerReady condition."""
    deployment = await rt.writer.get("apps/v1", "Deployment", chain.meta.namespace,
                                     n.server_name(chain.spec.cortex_ref.name))
    server_ready = find((cortex.get("status") or {}).get("conditions"), "ServerReady")
    return in_force(chain.spec.hooks, deployment, server_ready)


async def reconcile(rt: Runtime, key: Key) -> float | None:
    """One pass over a HookChain."""
    opened = await open_satellite(rt, key, parse_chain, kind=KIND, invalid_type="Accepted",
                                  invalid_reason="InvalidSpec")
    if opened is None:
        return None
    chain = opened.resource
    siblings = opening.siblings(rt.views, parse_chain, kind=KIND, namespace=key.namespace,
                                cortex=opened.cortex_name)
    problem = validate_chains(siblings).get(chain.meta.name, None)
    accepted = Observation.of("Accepted", problem is None,
                              "Valid" if problem is None else "InvalidHook",
                              problem or f"{len(chain.spec.hooks)} hooks valid")
    fields = {}
    if problem is None:
        hooks = [h.model_dump(by_alias=True, mode="json", exclude_none=True)
                 for h in chain.spec.hooks]
        fields = {"acceptedHooks": hooks, "hookCount": len(hooks)}
    parts = [accepted, opened.located]
    if problem is None and opened.cortex is not None:
        parts.append(await _in_force(rt, chain, opened.cortex))
    summary = ready(parts, ready_reason="HooksInForce",
                    ready_message="hooks run in the cortex's serving pods")
    await write_status(rt.writer, kind=KIND, meta=chain.meta, current=opened.status,
                       observed=[*parts, summary], fields=fields)
    running = parts[-1]
    return NOT_RUNNING_RETRY_S if running.type == "InForce" and running.status != "True" else None
