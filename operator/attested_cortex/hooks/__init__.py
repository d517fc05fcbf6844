"""The hook pipeline: programmable Allow/Modify/Deny/AskUser decisions around every operation.

Public surface for the service layer and the CLI::

    pipeline = await open_pipeline(config_path, registry=registry)   # starts the watcher
    result = await pipeline.fire("pre_store", payload, agent_id=..., namespace=...)
    pipeline.describe()   # hooks.by_event for /v1/capabilities and doctor --hooks
    await pipeline.aclose()

Layout: :mod:`.events` (the event table), :mod:`.settings` (config file), :mod:`.decisions`
and :mod:`.patching` (wire decisions, merge patch), :mod:`.chaining` (pure fold),
:mod:`.reordering` (the one post- Modify: a ``post_recall`` reorder of the hits, and its
safety rule), :mod:`.firing` (one chain under its deadline), :mod:`.generations` and
:mod:`.dispatching` (hot-swappable configuration), :mod:`.transports` (exec, daemon,
remote), :mod:`.rpc` and :mod:`.supervising` (JSON-RPC link and restarts), :mod:`.sidecar`
(``cortexctl hookd``), :mod:`.payload_schemas` (event payloads), :mod:`.reference` (opt-in
hook programs).

The names below are imported lazily (PEP 562), so a hook program that imports
:mod:`.reference.serving` starts without loading the pipeline, prometheus or YAML.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from attested_cortex.hooks.chaining import ChainResult, HookRecord
    from attested_cortex.hooks.decisions import Allow, AskUser, Decision, Deny, Modify
    from attested_cortex.hooks.describing import RawHooksDescription
    from attested_cortex.hooks.dispatching import HookPipeline, open_pipeline
    from attested_cortex.hooks.loading import load_settings, parse_settings
    from attested_cortex.hooks.settings import HookConfigError, HookSpec, HooksSettings

_HOMES = {
    "ChainResult": "chaining", "HookRecord": "chaining",
    "Allow": "decisions", "AskUser": "decisions", "Decision": "decisions", "Deny": "decisions",
    "Modify": "decisions",
    "HookPipeline": "dispatching", "open_pipeline": "dispatching",
    "RawHooksDescription": "describing",
    "HookConfigError": "settings", "HooksSettings": "settings", "HookSpec": "settings",
    "load_settings": "loading", "parse_settings": "loading",
}

__all__ = [
    "Allow",
    "AskUser",
    "ChainResult",
    "Decision",
    "Deny",
    "HookConfigError",
    "HookPipeline",
    "HookRecord",
    "HookSpec",
    "HooksSettings",
    "Modify",
    "RawHooksDescription",
    "load_settings",
    "open_pipeline",
    "parse_settings",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOMES[name]}"), name)
