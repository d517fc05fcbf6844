"""HookChain: programs that see, change, deny or hold memory operations, as spec and status.

The CEL rules bounding ``timeoutMs`` are generated from the one event table in
``attested_cortex.hooks.events``, so the CRD, the hook pipeline and the docs agree. Read by
the renderer (``kinds``) and, later, by the operator's sidecar builder.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StringConstraints

from attested_cortex.crd.common import (
    DNS_LABEL_PATTERN,
    CommonStatus,
    CortexReference,
    CrdModel,
    ResourceRequirements,
)
from attested_cortex.hooks.events import CLASS_DEADLINES_MS, EVENTS, EventName

HookEvent = EventName
Argument = Annotated[str, StringConstraints(max_length=4096)]
HookMode = Literal["Exec", "Daemon"]
FailMode = Literal["Open", "Closed"]

#: The longest deadline of any class: the plain schema maximum of ``timeoutMs``.
MAX_TIMEOUT_MS = max(CLASS_DEADLINES_MS.values())


def timeout_rules() -> list[dict[str, str]]:
    """One CEL rule per event class whose deadline is below the schema maximum."""
    rules = []
    for cls, deadline in sorted(CLASS_DEADLINES_MS.items()):
        events = sorted(name for name, c in EVENTS.items() if c == cls)
        if deadline >= MAX_TIMEOUT_MS or not events:
            continue
        quoted = ", ".join(f"'{name}'" for name in events)
        rule = f"!self.events.exists(e, e in [{quoted}]) || self.timeoutMs <= {deadline}"
        message = f"timeoutMs exceeds the {cls} event class deadline of {deadline} ms"
        rules.append({"rule": rule, "message": message})
    return rules


def mode_rules() -> list[dict[str, str]]:
    """Exec hooks run a command; Daemon hooks run a sidecar; never both."""
    checks = [
        ("self.mode != 'Exec' || has(self.command)", "Exec hooks need command"),
        ("self.mode != 'Daemon' || has(self.sidecar)", "Daemon hooks need sidecar"),
        ("self.mode != 'Exec' || !has(self.sidecar)", "Exec hooks take no sidecar"),
        ("self.mode != 'Daemon' || !has(self.command)", "Daemon hooks take sidecar.command"),
    ]
    return [{"rule": rule, "message": message} for rule, message in checks]


class EnvVar(CrdModel):
    """An environment variable of the sidecar."""

    name: str = Field(description="Variable name.", min_length=1, max_length=256)
    value: str = Field(default="", description="Variable value.", max_length=32768)


class Sidecar(CrdModel):
    """The container a Daemon hook runs in, next to every cortex server pod."""

    image: str = Field(
        description="Container image of the hook daemon.", min_length=1, max_length=512
    )
    command: list[Argument] | None = Field(
        default=None,
        description="Entry point; `cortexctl hookd --listen ADDR -- CMD...` wraps a stdio hook.",
        max_length=64,
    )
    env: list[EnvVar] | None = Field(
        default=None,
        description="Environment of the container.",
        max_length=64,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="Compute resources of the container."
    )


def _hook_extra() -> dict[str, Any]:
    return {"x-kubernetes-validations": [*timeout_rules(), *mode_rules()]}


class Hook(CrdModel):
    """One hook: which events it sees, how it runs, and what happens when it fails."""

    model_config = ConfigDict(json_schema_extra=_hook_extra())

    name: str = Field(
        description="Name of the hook, unique in the chain (a DNS label).",
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
    )
    events: list[HookEvent] = Field(
        description="Events the hook runs on; pre_* hooks may modify, post_* hooks observe.",
        min_length=1,
        max_length=len(EVENTS),
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    mode: HookMode = Field(
        default="Exec",
        description="Exec starts `command` per event; Daemon talks to a long-lived sidecar.",
    )
    priority: int = Field(
        default=0, ge=-1000, le=1000, description="Order within an event; lower runs first."
    )
    timeout_ms: int = Field(
        default=1000,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description="Deadline of one call in ms, at most the event class deadline "
        "(write 5000, read 2000, index 1000, transcript 5000, approval 5000).",
    )
    fail_mode: FailMode = Field(
        default="Open",
        description="Open lets the operation proceed when the hook fails or times out; "
        "Closed denies it.",
    )
    command: list[Argument] | None = Field(
        default=None,
        description="Exec mode: the program and its arguments.",
        min_length=1,
        max_length=64,
    )
    sidecar: Sidecar | None = Field(default=None, description="Daemon mode: the sidecar container.")
    allow_exec_on_hot_path: bool = Field(
        default=False,
        description="Exec mode on read events (pre/post_recall, search, kg_*) starts a process "
        "per read and is refused unless this is true; prefer Daemon there.",
    )


class HookChainSpec(CrdModel):
    """Desired state of a HookChain."""

    cortex_ref: CortexReference = Field(description="The MemoryCortex the hooks apply to.")
    hooks: list[Hook] = Field(
        description="The hooks of the chain.",
        min_length=1,
        max_length=32,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class HookChainStatus(CommonStatus):
    """Observed state of a HookChain."""

    hook_count: int | None = Field(
        default=None, ge=0, description="Number of hooks the cortex server loaded."
    )
    accepted_hooks: list[Hook] | None = Field(
        default=None,
        description="The hooks of the last valid spec: what stays in force while the current "
        "spec is invalid.",
        max_length=32,
    )
