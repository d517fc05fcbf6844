"""Reads and validates the hook config file into :class:`~.settings.HooksSettings`.

The config file (YAML or JSON; the operator renders it from HookChain resources) is read
by :func:`load_settings` at server start and by the hot-reload watcher (:mod:`.watching`).
The format is documented in ``docs/hooks.md``. Every validation error is a
:class:`~.settings.HookConfigError` whose message names the offending hook. Parsing is
pure; only :func:`load_settings` reads a file.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast

import yaml

from attested_cortex.hooks.addresses import parse_address
from attested_cortex.hooks.events import EVENTS, HOT_PATH_EVENTS, EventName, deadline_ms
from attested_cortex.hooks.settings import (
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_OUTPUT_BYTES,
    HookConfigError,
    HookSpec,
    HooksSettings,
    Mode,
)

#: post_recall and post_search run on every read: they default to daemon mode.
DAEMON_BY_DEFAULT: Final = frozenset({"post_recall", "post_search"})
_NAME: Final = re.compile(r"[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?")
_HOOK_KEYS: Final = frozenset({
    "name", "events", "mode", "priority", "timeout_ms", "fail_mode", "command", "namespaces",
    "address", "allow_exec_on_hot_path", "max_in_flight", "max_output_bytes", "env",
})



def load_settings(path: Path) -> HooksSettings:
    """Read and validate the config file at ``path``; a missing file means no hooks."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return HooksSettings()
    except OSError as exc:
        raise HookConfigError(f"cannot read hook config {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise HookConfigError(f"hook config {path} is not UTF-8 (byte {exc.start})") from exc
    return parse_settings_text(text)


def parse_settings_text(text: str) -> HooksSettings:
    """Parse YAML or JSON config text (JSON is valid YAML)."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise HookConfigError(f"hook config is not valid YAML/JSON: {exc}") from exc
    except RecursionError as exc:  # PyYAML composes recursively
        raise HookConfigError("hook config nests too deeply to parse") from exc
    return parse_settings(document)


def parse_settings(document: object) -> HooksSettings:
    """Validate a decoded config document: ``{version: 1, hooks: [...]}`` (or nothing)."""
    if document is None:
        return HooksSettings()
    if not isinstance(document, dict) or set(document) - {"version", "hooks"}:
        raise HookConfigError("hook config must be an object with 'version' and 'hooks'")
    if document.get("version", 1) != 1:
        raise HookConfigError(f"unsupported hook config version {document['version']!r}")
    raw_hooks = document.get("hooks")
    raw_hooks = [] if raw_hooks is None else raw_hooks
    if not isinstance(raw_hooks, list):
        raise HookConfigError("'hooks' must be a list")
    hooks = tuple(parse_hook(raw, index=i) for i, raw in enumerate(raw_hooks))
    _check_unique(hooks)
    return HooksSettings(hooks=hooks)


def parse_hook(raw: object, *, index: int) -> HookSpec:
    """Validate one hook entry; errors name the hook (or its index when unnamed)."""
    if not isinstance(raw, dict):
        raise HookConfigError(f"hooks[{index}] must be an object")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise HookConfigError(f"hooks[{index}]: 'name' must be a DNS-like name", hook=name)
    return _Parser(name=name, raw=raw).spec()


@dataclass(frozen=True)
class _Parser:
    name: str
    raw: Mapping[str, Any]

    def fail(self, message: str) -> HookConfigError:
        return HookConfigError(f"hook {self.name!r}: {message}", hook=self.name)

    def spec(self) -> HookSpec:
        unknown = set(self.raw) - _HOOK_KEYS
        if unknown:
            raise self.fail(f"unknown keys {sorted(unknown)}")
        events = self.events()
        mode = self.mode(events)
        return HookSpec(
            name=self.name, events=events, mode=mode,
            timeout_ms=self.timeout(events), priority=self.integer("priority", 0, low=None),
            fail_mode=self.choice("fail_mode", ("open", "closed"), "open"),
            command=self.command(mode), address=self.address(mode),
            namespaces=self.strings("namespaces"),
            max_in_flight=self.integer("max_in_flight", DEFAULT_MAX_IN_FLIGHT, low=1),
            max_output_bytes=self.integer("max_output_bytes", DEFAULT_MAX_OUTPUT_BYTES, low=64),
            env=self.env(),
        )

    def events(self) -> tuple[EventName, ...]:
        events = self.strings("events")
        if not events:
            raise self.fail("'events' must list at least one event")
        for event in events:
            if event not in EVENTS:
                raise self.fail(f"unknown event {event!r}")
        return cast(tuple[EventName, ...], events)

    def mode(self, events: tuple[str, ...]) -> Mode:
        default = "daemon" if DAEMON_BY_DEFAULT & set(events) else "exec"
        mode = cast(Mode, self.choice("mode", ("exec", "daemon", "remote"), default))
        if not isinstance(self.raw.get("allow_exec_on_hot_path", False), bool):
            raise self.fail("'allow_exec_on_hot_path' must be true or false")
        hot = sorted(HOT_PATH_EVENTS & set(events))
        if mode == "exec" and hot and self.raw.get("allow_exec_on_hot_path") is not True:
            raise self.fail(
                f"exec mode on hot-path event(s) {hot} spawns a process per read; use "
                "mode: daemon, or set allow_exec_on_hot_path: true"
            )
        return mode

    def timeout(self, events: tuple[EventName, ...]) -> int:
        tightest = min(events, key=deadline_ms)
        timeout = self.integer("timeout_ms", deadline_ms(tightest), low=1)
        if timeout > deadline_ms(tightest):
            raise self.fail(
                f"timeout_ms {timeout} exceeds the {EVENTS[tightest]} class deadline "
                f"of {deadline_ms(tightest)} ms (event {tightest!r})"
            )
        return timeout

    def command(self, mode: Mode) -> tuple[str, ...]:
        value = self.raw.get("command")
        if mode == "remote":
            if value is not None:
                raise self.fail("remote hooks take 'address', not 'command'")
            return ()
        if isinstance(value, str):
            value = shlex.split(value)
        if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
            raise self.fail(f"{mode} hooks need 'command': a non-empty list of strings")
        if any("\x00" in v for v in value):  # no process can be started with one
            raise self.fail("'command' must not contain NUL (\\u0000)")
        return tuple(value)

    def address(self, mode: Mode) -> str | None:
        value = self.raw.get("address")
        if mode != "remote":
            if value is not None:
                raise self.fail("'address' is only for mode: remote")
            return None
        if not isinstance(value, str):
            raise self.fail("remote hooks need 'address' (tcp://HOST:PORT or unix:///path)")
        try:
            return str(parse_address(value))
        except ValueError as exc:
            raise self.fail(str(exc)) from exc

    def env(self) -> dict[str, str]:
        value = self.raw.get("env", {})
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self.fail("'env' must map strings to strings")
        for key, item in value.items():  # what execve refuses, refused here
            if not key or "=" in key or "\x00" in key or "\x00" in item:
                raise self.fail(f"'env' name {key!r} or its value is not a valid environment "
                                "variable (empty, '=' or NUL)")
        return dict(value)

    def strings(self, key: str) -> tuple[str, ...]:
        value = self.raw.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(f"{key!r} must be a list of non-empty strings")
        return tuple(value)

    def integer(self, key: str, default: int, *, low: int | None) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"{key!r} must be an integer")
        if low is not None and value < low:
            raise self.fail(f"{key!r} must be at least {low}")
        return value

    def choice(self, key: str, allowed: tuple[str, ...], default: str) -> Any:
        value = self.raw.get(key, default)
        if value not in allowed:
            raise self.fail(f"{key!r} must be one of {list(allowed)}, not {value!r}")
        return value


def _check_unique(hooks: tuple[HookSpec, ...]) -> None:
    seen: set[str] = set()
    for hook in hooks:
        if hook.name in seen:
            raise HookConfigError(f"hook {hook.name!r}: the name is used twice", hook=hook.name)
        seen.add(hook.name)
