"""The hook configuration as values: :class:`HooksSettings` of :class:`HookSpec`.

Produced by :mod:`.loading` (file format and validation, documented in ``docs/hooks.md``),
consumed by the pipeline (:mod:`.dispatching`) and ``cortexctl hookd``. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from attested_cortex.errors import InvalidInputError
from attested_cortex.hooks.events import EventName

Mode = Literal["exec", "daemon", "remote"]
FailMode = Literal["open", "closed"]

DEFAULT_MAX_IN_FLIGHT: Final = 64
DEFAULT_MAX_OUTPUT_BYTES: Final = 1 << 20

class HookConfigError(InvalidInputError):
    """The hook configuration is invalid; ``details['hook']`` names the faulty hook."""

    code = "invalid_hook_config"


@dataclass(frozen=True)
class HookSpec:
    """One configured hook, validated."""

    name: str
    events: tuple[EventName, ...]
    mode: Mode
    timeout_ms: int
    priority: int = 0
    fail_mode: FailMode = "open"
    command: tuple[str, ...] = ()
    address: str | None = None
    namespaces: tuple[str, ...] = ()
    max_in_flight: int = DEFAULT_MAX_IN_FLIGHT
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HooksSettings:
    """The whole hook configuration; empty means no hook ever fires."""

    hooks: tuple[HookSpec, ...] = ()
