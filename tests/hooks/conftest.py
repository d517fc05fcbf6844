"""Fixtures for the hook pipeline tests: a private metrics registry, the test hook program,
and a builder that starts a real pipeline (real subprocesses) from a config dict."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from attested_cortex.hooks import HookPipeline, parse_settings
from attested_cortex.hooks.supervising import Backoff

PROGRAMS = Path(__file__).parent / "programs"
BEHAVE = [sys.executable, str(PROGRAMS / "behave.py")]
#: Fast restarts so crash tests finish quickly; the delays still grow exponentially.
FAST_BACKOFF = Backoff(initial_s=0.05, factor=2.0, max_s=0.4, stable_s=5.0)


def hook(name: str, events: list[str], **fields: Any) -> dict[str, Any]:
    """A hook entry running the behave program (exec unless ``mode`` says otherwise)."""
    default = fields.pop("behave", None)
    command = [*BEHAVE] if default is None else [*BEHAVE, json.dumps(default)]
    return {"name": name, "events": events, "command": command, **fields}


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


PipelineFactory = Callable[..., Awaitable[HookPipeline]]


@pytest.fixture
async def make_pipeline(registry: CollectorRegistry) -> AsyncIterator[PipelineFactory]:
    pipelines: list[HookPipeline] = []

    async def make(*hooks: dict[str, Any]) -> HookPipeline:
        settings = parse_settings({"version": 1, "hooks": list(hooks)})
        pipeline = HookPipeline(settings, registry=CollectorRegistry() if pipelines else registry,
                                backoff=FAST_BACKOFF)
        pipelines.append(pipeline)
        await pipeline.start()
        return pipeline

    yield make
    for pipeline in pipelines:
        await pipeline.aclose()


def metric(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0 when absent."""
    return registry.get_sample_value(name, labels) or 0.0


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie awaiting its reaper does not count)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or before the read
        return False
