"""The operator's tables come from crd/kinds.KINDS: every kind of ours is reconciled, watched
and addressable without being listed again (issue 22, item 4)."""

from __future__ import annotations

from attested_cortex.controller import registry
from attested_cortex.controller.applying import path
from attested_cortex.crd import KINDS


def test_every_kind_has_a_pass_and_a_path() -> None:
    for kind in KINDS:
        assert kind.kind in registry.PASSES
        assert path(kind.api_version, kind.kind, "ns", "x", "status") == (
            f"/apis/{kind.api_version}/namespaces/ns/{kind.plural}/x/status")


def test_satellites_are_the_kinds_that_name_a_cortex() -> None:
    assert set(registry.SATELLITES) == {"AgentIdentity", "HookChain", "PermissionRule"}
    assert {kind.kind for kind in KINDS if not kind.satellite} == {"MemoryCortex"}


def test_every_kind_is_indexed_and_watched() -> None:
    handlers = {h.id for h in registry.REGISTRY._indexing.get_all_handlers()}
    watchers = {h.id for h in registry.REGISTRY._watching.get_all_handlers()}
    for kind in KINDS:
        assert f"{kind.kind}_by_name" in handlers
        assert (f"{kind.kind}_by_cortex" in handlers) is kind.satellite
    assert {f"{k}_changed" for k in registry.SATELLITES} <= watchers
