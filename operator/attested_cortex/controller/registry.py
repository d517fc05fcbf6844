"""The operator's kopf registry: watches that feed the work queue, and its start and stop.

Every handler is a coroutine: kopf runs plain functions in threads, and the queue lives on
the event loop. kopf only *observes* here: indices keep the custom resources (so a pass reads
its inputs without a request), and ``on.event`` handlers turn every change of a custom
resource or of a labelled child into queue keys. No kopf change handler, daemon or timer is
registered, so kopf puts no finalizer and no progress annotation on any object: deleting a
namespace never waits for the operator. All writes come from the controllers through
:mod:`.applying`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, Protocol

import kopf

from attested_cortex import tasks
from attested_cortex.builders import names as n
from attested_cortex.builders.conditions import Observation
from attested_cortex.builders.inputs import Defaults, parse_meta
from attested_cortex.controller import (
    agentidentity,
    cortexsubscription,
    hookchain,
    memorycortex,
    permissionrule,
)
from attested_cortex.controller.applying import ApiWriter, CollisionError
from attested_cortex.controller.login import connection_info, login
from attested_cortex.controller.memorycortex.cloudnativepg import clusters_served
from attested_cortex.controller.metrics import CONDITIONS, RECONCILES
from attested_cortex.controller.queueing import Key, WorkQueue
from attested_cortex.controller.runtime import Runtime, Views, snapshot
from attested_cortex.controller.statuses import write_status
from attested_cortex.controller.versions import newest_schema_version
from attested_cortex.crd import GROUP, KINDS, VERSION
from attested_cortex.kubeclient import ApiError, ApiInvalidError, KubeApi

log = logging.getLogger(__name__)
REGISTRY = kopf.OperatorRegistry()
CHILD_LABELS: Final = {n.MANAGED_BY_LABEL: n.MANAGED_BY}
WORKERS: Final = int(os.environ.get("ATTESTED_CORTEX_WORKERS", "8"))

ReconcileFn = Callable[[Runtime, Key], Awaitable[float | None]]


class Controller(Protocol):
    """What a kind's controller package offers: its kind and its pass."""

    KIND: str

    async def reconcile(self, rt: Runtime, key: Key) -> float | None: ...


#: One line per kind of ours: the rest is derived from crd/kinds.KINDS.
CONTROLLERS: Final[tuple[Controller, ...]] = (memorycortex, agentidentity, hookchain,
                                              permissionrule, cortexsubscription)
#: Kinds whose validity is decided across the satellites of a cortex (hook names, agent
#: ids): a change of one brings its siblings back too.
ACROSS_SIBLINGS: Final = frozenset({hookchain.KIND, agentidentity.KIND})
PLURALS: Final = {kind.kind: kind.plural for kind in KINDS}
SATELLITES: Final = tuple(kind.kind for kind in KINDS if kind.satellite)
PASSES: Final[dict[str, ReconcileFn]] = {c.KIND: c.reconcile for c in CONTROLLERS}
if set(PASSES) != set(PLURALS):  # a kind without a controller would be watched for nothing
    raise RuntimeError(f"kinds without a controller: {sorted(set(PLURALS) - set(PASSES))}; "
                       f"controllers without a kind: {sorted(set(PASSES) - set(PLURALS))}")


def defaults_from_env() -> Defaults:
    """Images and names the chart passes to the operator's container."""
    return Defaults(
        server_image=os.environ.get("ATTESTED_CORTEX_SERVER_IMAGE", "attested-cortex/cortex:0.1.0"),
        postgres_image=os.environ.get("ATTESTED_CORTEX_POSTGRES_IMAGE",
                                      "attested-cortex/postgres-age:17"),
        schema_version=newest_schema_version(),
        tokenreview_role=os.environ.get("ATTESTED_CORTEX_TOKENREVIEW_CLUSTERROLE",
                                        "attested-cortex-tokenreviewer"),
        image_pull_policy=os.environ.get("ATTESTED_CORTEX_IMAGE_PULL_POLICY", "IfNotPresent"),
    )


async def dispatch(rt: Runtime, key: Key) -> float | None:
    """Dispatch one key to its kind's pass; a failed pass leaves its error in the Ready
    condition. The work queue calls this (and the fast controller tests, with an in-memory
    runtime).

    A refused object (400/422: e.g. a StatefulSet field Kubernetes does not let change) is
    not retried: the same spec would be refused again, so the next pass waits for a change.
    Everything else (unavailable, conflicts, missing permissions) is retried with backoff.
    """
    try:
        delay = await PASSES[key.kind](rt, key)
    except CollisionError as exc:  # the other owner's changes (or its deletion) wake us up
        RECONCILES.labels(key.kind, "error").inc()
        body = rt.views.get(key.kind, key.namespace, key.name)
        if body is not None:
            await write_status(rt.writer, kind=key.kind, meta=parse_meta(body),
                               current=body.get("status") or {},
                               observed=[Observation.of("Ready", False, exc.reason, str(exc))])
        return None
    except ApiError as exc:
        RECONCILES.labels(key.kind, "error").inc()
        refused = isinstance(exc, ApiInvalidError)
        body = rt.views.get(key.kind, key.namespace, key.name)
        if body is not None:
            error = Observation.of("Ready", False, "ApplyRefused" if refused else "ReconcileError",
                                   f"{type(exc).__name__}: {exc.message}"[:1024])
            with contextlib.suppress(ApiError):  # the retry log reports the original error
                await write_status(rt.writer, kind=key.kind, meta=parse_meta(body),
                                   current=body.get("status") or {}, observed=[error])
        if refused:
            log.warning("object refused by the API server; waiting for a spec change",
                        extra={"key": "/".join(key), "error": exc.message[:500]})
            return None
        raise
    RECONCILES.labels(key.kind, "ok").inc()
    return delay


def _index(kind: str, by: Callable[[str, str, Any], tuple[str, str]]) -> Callable[..., Any]:
    async def handler(namespace: str, name: str, body: kopf.Body, **_: Any) -> Any:
        return {by(namespace, name, body): snapshot(body)}
    return handler


def _cortex_of(namespace: str, _: str, body: Any) -> tuple[str, str]:
    return namespace, str((body.get("spec") or {}).get("cortexRef", {}).get("name", ""))


for _kind, _plural in PLURALS.items():
    kopf.index(GROUP, VERSION, _plural, registry=REGISTRY, id=f"{_kind}_by_name")(
        _index(_kind, lambda ns, name, _: (ns, name)))
for _kind in SATELLITES:
    kopf.index(GROUP, VERSION, PLURALS[_kind], registry=REGISTRY, id=f"{_kind}_by_cortex")(
        _index(_kind, _cortex_of))


@kopf.index("", "v1", "secrets", registry=REGISTRY, id="Secret_by_name")
async def secret_names(namespace: str | None, name: str, **_: Any) -> Any:
    """Which Secrets exist (names only, never their data): a pass that finds a generated
    Secret here needs no request to know it must not create it again."""
    return {(namespace, name): {"metadata": {"name": name, "namespace": namespace}}}


def _runtime(memo: Any, indices: dict[str, Any]) -> Runtime:
    rt: Runtime = memo["runtime"]
    if not rt.views.by_name:  # the first handler call: kopf has listed everything by now
        for kind in (*PLURALS, "Secret"):
            rt.views.by_name[kind] = indices[f"{kind}_by_name"]
        for kind in SATELLITES:
            rt.views.by_cortex[kind] = indices[f"{kind}_by_cortex"]
        watched = None if memo.get("clusterwide") else frozenset(memo.get("namespaces") or ())
        memo["sweep"] = asyncio.create_task(_sweep(rt, watched))
    return rt


async def _sweep(rt: Runtime, watched: frozenset[str] | None) -> None:
    """Remove what cortexes deleted while the operator was down left behind (in the
    namespaces it watches only: ``watched`` is None when it watches every namespace)."""
    try:
        gone = await memorycortex.cleanup_orphans(rt, watched)
    except ApiError as exc:
        log.warning("orphan sweep failed", extra={"error": str(exc)})
        return
    if gone:
        log.info("removed orphaned TokenReview bindings", extra={"count": gone})


@kopf.on.event(GROUP, VERSION, "memorycortexes", registry=REGISTRY)
async def cortex_changed(namespace: str | None, name: str, memo: Any, **kwargs: Any) -> None:
    """The cortex and every satellite that names it (their verdicts depend on it)."""
    rt = _runtime(memo, kwargs)
    namespace = namespace or ""
    rt.enqueue("MemoryCortex", namespace, name)
    for kind in SATELLITES:
        for body in rt.views.of_cortex(kind, namespace, name):
            rt.enqueue(kind, namespace, body["metadata"]["name"])


def _satellite_changed(kind: str) -> Callable[..., Awaitable[None]]:
    async def handler(namespace: str, name: str, spec: Any, memo: Any, **kwargs: Any) -> None:
        rt = _runtime(memo, kwargs)
        cortex = str((spec or {}).get("cortexRef", {}).get("name", ""))
        rt.enqueue(kind, namespace, name)
        # Settled: one apply of many satellites (and their status writes) rolls once.
        rt.settle("MemoryCortex", namespace, cortex)
        # Name clashes (hook names, agent ids) are decided across the satellites of a cortex.
        if kind in ACROSS_SIBLINGS:
            for body in rt.views.of_cortex(kind, namespace, cortex):
                rt.enqueue(kind, namespace, body["metadata"]["name"])
    return handler


for _kind in SATELLITES:
    kopf.on.event(GROUP, VERSION, PLURALS[_kind], registry=REGISTRY, id=f"{_kind}_changed")(
        _satellite_changed(_kind))


async def _child_changed(namespace: str | None, labels: Mapping[str, str], memo: Any,
                   **kwargs: Any) -> None:
    """A child changed (status, drift, deletion): its owner takes another pass, and so does
    every other cortex whose names include it (one may be waiting for the name to free)."""
    rt = _runtime(memo, kwargs)
    namespace = namespace or ""
    identity = labels.get(n.IDENTITY_LABEL)
    if identity:
        rt.enqueue("AgentIdentity", namespace, identity)
    elif labels.get(n.INSTANCE_LABEL):
        rt.enqueue("MemoryCortex", namespace, labels[n.INSTANCE_LABEL])
    body = kwargs.get("body") or {}
    for cortex in n.claimants(str(body.get("kind", "")), str(kwargs.get("name", ""))):
        if rt.views.get("MemoryCortex", namespace, cortex) is not None:
            rt.enqueue("MemoryCortex", namespace, cortex)


# Pods too: a crash-looping server container changes no Deployment field, and ServerReady
# names it (builders/rollout.py).
for _group_version, _plural in (("apps/v1", "statefulsets"), ("apps/v1", "deployments"),
                                ("batch/v1", "jobs"), ("v1", "secrets"), ("v1", "configmaps"),
                                ("v1", "services"), ("v1", "pods"),
                                ("postgresql.cnpg.io/v1", "clusters")):
    _group, _, _version = _group_version.rpartition("/")
    kopf.on.event(_group, _version, _plural, registry=REGISTRY, labels=CHILD_LABELS,
                  id=f"child_{_plural}")(_child_changed)


@kopf.on.startup(registry=REGISTRY)
async def start(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Operator-wide behaviour, the API client and the workers."""
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 60
    # Watching named namespaces needs no CRD or namespace scanning, and the chart's Role
    # grants neither (kopf would retry forbidden lists for a minute before starting).
    settings.scanning.disabled = not memo.get("clusterwide", False)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=GROUP)
    api = KubeApi(login())
    views = Views()
    CONDITIONS.views = views
    holder: dict[str, Runtime] = {}

    async def reconcile(key: Key) -> float | None:
        return await dispatch(holder["rt"], key)

    queue = WorkQueue(reconcile, workers=WORKERS)
    holder["rt"] = Runtime(writer=ApiWriter(api), queue=queue, views=views,
                           defaults=defaults_from_env(), watches_clusters=bool(
                               memo.get("clusterwide")) or await clusters_served(api))
    memo["runtime"] = holder["rt"]
    memo["api"] = api
    memo["workers"] = asyncio.create_task(queue.run())


@kopf.on.cleanup(registry=REGISTRY)
async def stop(memo: kopf.Memo, **_: Any) -> None:
    """Stop the workers and close the client."""
    task: asyncio.Task[None] | None = memo.get("workers")
    await tasks.stop((task,))
    api: KubeApi | None = memo.get("api")
    if api is not None:
        await api.close()


@kopf.on.login(registry=REGISTRY)
def authenticate(**_: Any) -> kopf.ConnectionInfo:
    """The same credentials for kopf's watches as for the operator's writes."""
    return connection_info()
