"""HookChains rendered into the server's hook file (docs/hooks.md) and checked as the server
will check it. Pure.

Exec hooks run inside the server container; Daemon hooks run in sidecar containers and the
server reaches them as ``remote`` hooks on a Unix socket in a shared volume. The CRD says
"lower priority runs first", the hook file "higher runs first": the sign is flipped here.

Validation, in the order a user would want to hear about it: the chain's own hooks as the
server's loader sees them (the message names the hook), then name clashes with other chains
of the same cortex (the chain whose name sorts first keeps the name).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from attested_cortex.builders.inputs import Chain
from attested_cortex.crd.hookchain import Hook
from attested_cortex.hooks.loading import parse_settings
from attested_cortex.hooks.settings import HookConfigError

Object = dict[str, Any]

SOCKET_DIR: Final = "/var/run/cortex/hooks"


def socket_address(hook: str) -> str:
    """Where the server reaches a Daemon hook's sidecar."""
    return f"unix://{SOCKET_DIR}/{hook}.sock"


def hook_entry(hook: Hook) -> Object:
    """One entry of the hook file."""
    entry: Object = {"name": hook.name, "events": list(hook.events),
                     "priority": -hook.priority, "timeout_ms": hook.timeout_ms,
                     "fail_mode": hook.fail_mode.lower()}
    if hook.mode == "Daemon":
        entry |= {"mode": "remote", "address": socket_address(hook.name)}
    else:
        entry |= {"mode": "exec", "command": list(hook.command or [])}
        if hook.allow_exec_on_hot_path:
            entry["allow_exec_on_hot_path"] = True
    return entry


#: The loader speaks the hook file's words; a HookChain author reads the CRD's.
CRD_WORDS: Final = (("allow_exec_on_hot_path", "allowExecOnHotPath"),
                    ("mode: daemon", "mode: Daemon"), ("mode: exec", "mode: Exec"),
                    ("timeout_ms", "timeoutMs"), ("fail_mode", "failMode"))


def check_hooks(hooks: Sequence[Hook]) -> str | None:
    """The server loader's verdict on these hooks: None, or a message naming the hook."""
    try:
        parse_settings({"version": 1, "hooks": [hook_entry(h) for h in hooks]})
    except HookConfigError as exc:
        message = exc.message
        for file_word, crd_word in CRD_WORDS:
            message = message.replace(file_word, crd_word)
        return message
    return None


def validate_chains(chains: Iterable[Chain]) -> dict[str, str | None]:
    """Per chain name: None when it can be rendered, else why not."""
    verdicts: dict[str, str | None] = {}
    owners: dict[str, str] = {}
    for chain in sorted(chains, key=lambda c: c.meta.name):
        problem = check_hooks(chain.spec.hooks)
        clash = next((h.name for h in chain.spec.hooks if h.name in owners), None)
        if problem is None and clash is not None:
            problem = (f"hook {clash!r}: the name is already used by HookChain "
                       f"{owners[clash]} of the same cortex")
        verdicts[chain.meta.name] = problem
        in_force = chain.spec.hooks if problem is None else chain.status.accepted_hooks or []
        owners.update({h.name: chain.meta.name for h in in_force})
    return verdicts


def hooks_in_force(chains: Iterable[Chain]) -> list[Hook]:
    """Valid chains contribute their spec; an invalid one keeps its last accepted hooks."""
    chains = list(chains)
    verdicts = validate_chains(chains)
    hooks: list[Hook] = []
    for chain in sorted(chains, key=lambda c: c.meta.name):
        if verdicts[chain.meta.name] is None:
            hooks += chain.spec.hooks
        else:
            hooks += chain.status.accepted_hooks or []
    return _unique(hooks)


def _unique(hooks: list[Hook]) -> list[Hook]:
    seen: dict[str, Hook] = {}
    for hook in hooks:
        seen.setdefault(hook.name, hook)
    return list(seen.values())


def render_hooks_file(hooks: Iterable[Hook]) -> Mapping[str, Any]:
    """The hook file document."""
    return {"version": 1, "hooks": [hook_entry(h) for h in hooks]}
