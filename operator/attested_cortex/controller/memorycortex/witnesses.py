"""AuditWitnessed: the operator-run witnesses of ``spec.audit.witnesses[].run`` (ADR 0102).

Per witness: its key Secret (generated once, like the audit signer's: never replaced while
it exists, never read back), its ServiceAccount, its state claim and its Deployment,
applied on every pass; the Deployment and ServiceAccount of a witness no longer in the spec
are deleted (its key and state stay until the cortex goes: a witness named again resumes).
Each witness's report (``GET /report`` on its pod's IP, :mod:`.witnessreading`) becomes
``status.audit.witnesses`` and the condition (builders/witnessstates.py); the pass comes
back after the shortest interval, but not before :data:`POLL_FLOOR_S`, to read them again.
Like the unwatched CloudNativePG poll, that pass re-applies the cortex's children
(server-side no-ops that change no object); the status is written only when a report
changed. An operator-run witness reads the cortex with its
ServiceAccount's token, so it needs ``server.auth.mode: Kubernetes`` and the audit signer;
without them nothing is run and the condition says why.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from nacl.signing import SigningKey

from attested_cortex.builders import names as n
from attested_cortex.builders import settings, witnesses, witnessstates
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Cortex
from attested_cortex.controller.applying import together
from attested_cortex.controller.memorycortex import witnessreading
from attested_cortex.controller.runtime import Runtime
from attested_cortex.crd.witnesses import RunWitness

Object = dict[str, Any]
#: What goes with a witness that leaves the spec (its key and state stay with the cortex).
KINDS: Final = (("apps/v1", "Deployment"), ("v1", "ServiceAccount"))
#: The reports are not watched: read again this often at most.
POLL_FLOOR_S: Final = 15.0


@dataclass(frozen=True)
class WitnessOutcome:
    """The condition and ``status.audit`` (both None: no operator-run witness), and when
    to read the witnesses' reports again."""

    condition: Observation | None
    status: Object | None
    retry_in: float | None = None


def _unsupported(cortex: Cortex) -> str | None:
    if settings.audit_signer(cortex) is None:
        return "spec.audit.signer.mode is Off: there are no checkpoints to witness"
    if cortex.spec.server.auth.mode != "Kubernetes":
        return ("an operator-run witness reads the cortex with its ServiceAccount's token: "
                "it needs spec.server.auth.mode Kubernetes")
    return None


def _selector(cortex: Cortex) -> str:
    return f"{n.INSTANCE_LABEL}={cortex.meta.name},{n.COMPONENT_LABEL}=witness"


async def _remove_gone(rt: Runtime, cortex: Cortex, wanted: set[str]) -> None:
    for api_version, kind in KINDS:
        for obj in await rt.writer.list(api_version, kind, cortex.meta.namespace,
                                        _selector(cortex)):
            labels = obj["metadata"].get("labels") or {}
            if labels.get(witnesses.WITNESS_LABEL) not in wanted:
                await rt.writer.delete(api_version, kind, cortex.meta.namespace,
                                       obj["metadata"]["name"])


def _key(cortex: Cortex, name: str) -> Object:
    return witnesses.build_key_secret(cortex, name, SigningKey.generate().encode())


def _steps(rt: Runtime, cortex: Cortex, name: str, run: RunWitness) -> list[Awaitable[Any]]:
    return [rt.create_once(lambda: _key(cortex, name), cortex.meta.namespace,
                           f"{witnesses.base_name(cortex, name)}-key"),
            rt.writer.apply(witnesses.build_service_account(cortex, name)),
            rt.writer.apply(witnesses.build_state_claim(cortex, name, run))]


async def ensure(rt: Runtime, cortex: Cortex, status: Mapping[str, Any]) -> WitnessOutcome:
    """Run the witnesses the spec asks for; read what they report."""
    running = witnesses.operator_run(cortex)
    why = _unsupported(cortex) if running else None
    await _remove_gone(rt, cortex, set() if why else {w.name for w, _ in running})
    if not running:
        return WitnessOutcome(None, None)
    if why is not None:
        return WitnessOutcome(Observation.of(witnessstates.CONDITION, False,
                                             "WitnessUnsupported", why), None)
    await together(*(step for w, run in running for step in _steps(rt, cortex, w.name, run)))
    await together(*(rt.writer.apply(witnesses.build_deployment(cortex, w.name, run,
                                                                rt.defaults))
                     for w, run in running))
    pods = await rt.writer.list("v1", "Pod", cortex.meta.namespace, _selector(cortex))
    before = witnessstates.previous_items(status)
    reports = await together(*(witnessreading.report(pods, w.name) for w, _ in running))
    items = [witnessstates.entry(w.name, found, before.get(w.name))
             for (w, _), found in zip(running, reports, strict=True)]
    return WitnessOutcome(witnessstates.condition(items), {"witnesses": items},
                          retry_in=max(POLL_FLOOR_S,
                                       float(min(run.interval_seconds for _, run in running))))
