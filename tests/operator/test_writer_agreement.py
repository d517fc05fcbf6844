"""The in-memory Writer (tests/support/memorycluster.py) and the real one agree.

tests/controller_fast runs the reconcilers on the in-memory writer; each scenario here runs
on both, the real one against the control plane, with the same expectations, so the fake
cannot drift silently from what the passes rely on: server-side apply merged by field
manager, the status subresource, generation and resourceVersion, Conflict and NotFound,
the child-collision refusal, events and label selectors (ADR 0027).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hack.support.kube import Kube

from attested_cortex.builders.inputs import Meta
from attested_cortex.builders.logicalbackups import build_logical_backup_cronjob
from attested_cortex.controller.applying import APPLY, ApiWriter, CollisionError, Writer, path
from attested_cortex.controller.eventing import post_event
from attested_cortex.crd import GROUP, VERSION
from attested_cortex.kubeclient import ApiConflictError, ApiNotFoundError, KubeApi, from_kubeconfig
from tests.builders.specs import DEFAULTS
from tests.builders.specs import cortex as cortex_spec
from tests.crd.conftest import install_crds
from tests.support.memorycluster import MemoryCluster, MemoryWriter

Object = dict[str, Any]
OtherFn = Callable[[Object, str], Awaitable[Object]]
API = f"{GROUP}/{VERSION}"


@dataclass
class Side:
    """The operator's writer, and another field manager's apply (a user, or Kubernetes'
    own controllers writing status)."""

    writer: Writer
    namespace: str
    other: OtherFn


async def _memory() -> AsyncIterator[Side]:
    cluster = MemoryCluster()
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "agree"}},
                  manager="kubectl")

    async def other(obj: Object, subresource: str) -> Object:
        return cluster.apply(obj, manager="kubectl", subresource=subresource)
    yield Side(MemoryWriter(cluster), "agree", other)


async def _real(kube: Kube) -> AsyncIterator[Side]:
    install_crds(kube)
    namespace = f"agree-{uuid.uuid4().hex[:8]}"
    kube.kubectl("create", "namespace", namespace)
    api = KubeApi(from_kubeconfig(kube.kubeconfig))

    async def other(obj: Object, subresource: str) -> Object:
        meta = obj["metadata"]
        return await api.request(
            "PATCH", path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"],
                          subresource or None),
            body=obj, content_type=APPLY, params={"fieldManager": "kubectl", "force": "true"})
    try:
        yield Side(ApiWriter(api), namespace, other)
    finally:
        await api.close()
        kube.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


@pytest.fixture(params=["memory", pytest.param("real", marks=pytest.mark.kube)])
async def side(request: pytest.FixtureRequest) -> AsyncIterator[Side]:
    made = _memory() if request.param == "memory" else _real(request.getfixturevalue("kube"))
    async for value in made:
        yield value


def config_map(side: Side, data: dict[str, str], **labels: str) -> Object:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "cm", "namespace": side.namespace, "labels": labels}, "data": data}


def chain(side: Side, *hooks: str) -> Object:
    listed = [{"name": h, "events": ["pre_store"], "mode": "Exec", "command": ["true"]}
              for h in hooks]
    return {"apiVersion": API, "kind": "HookChain", "metadata": {
        "name": "hc", "namespace": side.namespace},
        "spec": {"cortexRef": {"name": "mem"}, "hooks": listed}}


def version(obj: Object) -> str:
    return str(obj["metadata"]["resourceVersion"])


async def test_apply_merges_by_field_manager(side: Side) -> None:
    w = side.writer
    await w.apply(config_map(side, {"a": "1", "b": "2"}, x="1"))
    await side.other({**config_map(side, {}, y="2"), "data": {}}, "")
    live = await w.apply(config_map(side, {"a": "1"}, x="1"))  # b is no longer named
    assert live["data"] == {"a": "1"}
    assert live["metadata"]["labels"] == {"x": "1", "y": "2"}  # y is the other manager's
    again = await w.apply(config_map(side, {"a": "1"}, x="1"))
    assert version(again) == version(live)  # the same apply changes nothing
    await side.other(config_map(side, {"a": "9"}), "")  # taken over (force)
    kept = await w.apply(config_map(side, {}, x="1"))
    assert kept["data"] == {"a": "9"}  # no longer the operator's to remove
    back = await w.apply(config_map(side, {"a": "1"}, x="1"))
    assert back["data"] == {"a": "1"}


async def test_status_is_a_subresource(side: Side) -> None:
    w = side.writer
    with pytest.raises(ApiNotFoundError):
        await w.apply({**chain(side), "status": {"hookCount": 1}}, subresource="status")
    created = await side.other(chain(side, "one"), "")
    assert created["metadata"]["generation"] == 1
    status = {"observedGeneration": 1, "hookCount": 1, "acceptedHooks": [
        {"name": "one", "events": ["pre_store"], "mode": "Exec", "command": ["true"]}]}
    live = await w.apply({**chain(side, "ignored"), "status": status}, subresource="status")
    # (the real API server also fills the schema's defaults in; the passes parse with the
    # same models, which fill them too, so the in-memory store need not)
    assert (live["status"]["hookCount"], [h["name"] for h in live["status"]["acceptedHooks"]]
            ) == (1, ["one"])
    assert [h["name"] for h in live["spec"]["hooks"]] == ["one"]  # spec untouched
    assert live["metadata"]["generation"] == 1
    live = await w.apply({**chain(side), "status": {"observedGeneration": 1}},
                         subresource="status")
    assert live["status"] == {"observedGeneration": 1}  # what it no longer names goes
    changed = await side.other(chain(side, "one", "two"), "")
    assert changed["metadata"]["generation"] == 2 and changed["status"] == live["status"]
    await side.other({**chain(side, "one", "two"), "metadata": {
        **chain(side)["metadata"], "labels": {"team": "a"}}}, "")
    labelled = await w.get(API, "HookChain", side.namespace, "hc")
    assert labelled is not None and labelled["metadata"]["generation"] == 2


async def test_create_replace_and_delete_answer_conflict_and_not_found(side: Side) -> None:
    w = side.writer
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "s", "namespace": side.namespace}, "data": {"k": "MQ=="}}
    created = await w.create(secret)
    with pytest.raises(ApiConflictError):
        await w.create({**secret, "data": {"k": "Mg=="}})
    assert (await w.get("v1", "Secret", side.namespace, "s") or {})["data"] == {"k": "MQ=="}
    replaced = await w.replace({**created, "data": {"k": "Mw=="}})
    assert version(replaced) != version(created)
    with pytest.raises(ApiConflictError):
        await w.replace({**created, "data": {"k": "NA=="}})  # read before the replace
    with pytest.raises(ApiNotFoundError):
        await w.replace({**replaced, "metadata": {**replaced["metadata"], "name": "nope",
                                                  "resourceVersion": None}})
    assert await w.delete("v1", "Secret", side.namespace, "s") is True
    assert await w.get("v1", "Secret", side.namespace, "s") is None
    assert await w.delete("v1", "Secret", side.namespace, "s") is False
    assert await w.remove("v1", "Secret", side.namespace, "s") is False


async def test_a_child_another_owner_controls_is_left_alone(side: Side) -> None:
    w = side.writer
    namespace = await w.get("v1", "Namespace", None, side.namespace)
    assert namespace is not None
    theirs = {"apiVersion": "v1", "kind": "Namespace", "name": side.namespace,
              "uid": namespace["metadata"]["uid"], "controller": True}
    owned = config_map(side, {"a": "1"})
    owned["metadata"]["ownerReferences"] = [theirs]
    await side.other(owned, "")
    mine = config_map(side, {"a": "2"})
    mine["metadata"]["ownerReferences"] = [{**theirs, "kind": "MemoryCortex",
                                            "apiVersion": API, "name": "mem", "uid": "other"}]
    with pytest.raises(CollisionError):
        await w.apply(mine)
    assert (await w.get("v1", "ConfigMap", side.namespace, "cm") or {})["data"] == {"a": "1"}


async def test_events_and_label_selectors(side: Side) -> None:
    w = side.writer
    await w.apply(config_map(side, {"a": "1"}, team="a"))
    other = config_map(side, {"a": "1"}, team="b")
    other["metadata"]["name"] = "cm2"
    await w.apply(other)
    listed = await w.list("v1", "ConfigMap", side.namespace, "team=b")
    assert [c["metadata"]["name"] for c in listed] == ["cm2"]
    meta = Meta(name="hc", namespace=side.namespace, uid="u", generation=1)
    await post_event(w, kind="HookChain", meta=meta, type_="Warning", reason="InvalidHook",
                     message="hook 'x': clash")
    events = await w.list("v1", "Event", side.namespace, "")
    assert [(e["involvedObject"]["name"], e["type"], e["reason"]) for e in events] == [
        ("hc", "Warning", "InvalidHook")]


async def test_the_backup_cronjob_is_accepted_applies_unchanged_and_goes(side: Side) -> None:
    store = {"endpoint": "http://minio:9000", "bucket": "backups",
             "credentialsSecretRef": {"name": "k"}}
    built = build_logical_backup_cronjob(
        cortex_spec({"backup": {"logical": {"objectStore": store}}}), DEFAULTS)
    # no owner here: the control plane's garbage collector would remove an orphan
    meta = {k: v for k, v in built["metadata"].items() if k != "ownerReferences"}
    cron = {**built, "metadata": {**meta, "namespace": side.namespace}}
    w = side.writer
    live = await w.apply(cron)
    assert live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0][
        "args"][:2] == ["export", "--to"]
    assert version(await w.apply(cron)) == version(live)
    assert await w.remove("batch/v1", "CronJob", side.namespace, meta["name"])
    assert await w.get("batch/v1", "CronJob", side.namespace, meta["name"]) is None
