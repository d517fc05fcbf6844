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
    assert set(registry.SATELLITES) == {"AgentIdentity", "CortexSubscription", "HookChain",
                                        "PermissionRule"}
    assert {kind.kind for kind in KINDS if not kind.satellite} == {"MemoryCortex"}


def test_every_kind_is_indexed_and_watched() -> None:
    handlers = {h.id for h in registry.REGISTRY._indexing.get_all_handlers()}
    watchers = {h.id for h in registry.REGISTRY._watching.get_all_handlers()}
    for kind in KINDS:
        assert f"{kind.kind}_by_name" in handlers
        assert (f"{kind.kind}_by_cortex" in handlers) is kind.satellite
    assert {f"{k}_changed" for k in registry.SATELLITES} <= watchers


def test_the_kind_controllers_are_independent() -> None:
    """No kind's controller imports another's, over the controllers the registry lists (so a
    new kind is covered without being named again; this was a hand-listed import contract)."""
    import grimp

    graph = grimp.build_graph("attested_cortex", cache_dir=None)
    packages = [c.__name__ for c in registry.CONTROLLERS]
    chains = [(a, b) for a in packages for b in packages if a != b
              and graph.chain_exists(importer=a, imported=b, as_packages=True)]
    assert not chains, f"kind controllers import each other: {chains}"
