"""The walk of one call through the package's modules, traced with :func:`sys.setprofile`
(issue 43 item 10: "crosses 22 modules and climbs back up 8 times").

Only functions of ``attested_cortex`` count, and only those called while ``root`` (a function
of the package, e.g. a route handler) is on the stack, so a background worker or the test's
own client running meanwhile is left out. Each call from a function of one module into a
function of another is a *crossing*; a crossing whose callee sits in a higher layer than its
caller (the import-linter layers of pyproject.toml, and inside the service resources >
workers > pipeline) is a *climb*: control going back up through a callback, as the
idempotency module calling a route's ``write`` closure did. Crossings and climbs are counted
once per (caller module, callee module, callee function), so a loop or a coroutine resumed
twice counts once. :func:`sections` is the builders' counterpart: which function made each
top-level key of a built document, and whether the builder changed it afterwards.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any

#: Top-level layers, highest first (pyproject.toml, "server routes -> service -> domain ->
#: store"); the service's own layers sit inside "service".
LAYERS = (
    ("cli",), ("controller", "server"), ("mcp",), ("service", "builders"), ("bundles",),
    ("spoke",), ("hooks", "policy", "attest", "transcripts", "embedding"), ("store",),
)
SERVICE = ("resources", "workers", "pipeline")
PACKAGE = "attested_cortex"


def rank(module: str) -> tuple[int, int]:
    """Lower is higher up: (top-level layer, service layer); a module in no layer (errors,
    namespaces, ...) ranks below every layer."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else ""
    for i, names in enumerate(LAYERS):
        if top in names:
            inner = SERVICE.index(parts[2]) if top == "service" and len(parts) > 2 and (
                parts[2] in SERVICE) else 0
            return i, inner
    return len(LAYERS), 0


@dataclass
class Walk:
    """What one traced call went through."""

    modules: list[str] = field(default_factory=list)  # in first-visit order
    crossings: set[tuple[str, str, str]] = field(default_factory=set)
    climbs: set[tuple[str, str, str]] = field(default_factory=set)
    #: Every crossing in call order (with repeats): how often control passed between two.
    passes: list[tuple[str, str]] = field(default_factory=list)

    def short(self, module: str) -> str:
        return module.removeprefix(PACKAGE + ".")

    def summary(self) -> str:
        climbs = sorted(f"{self.short(a)} -> {self.short(b)}.{f}" for a, b, f in self.climbs)
        return (f"{len(self.modules)} modules, {len(self.crossings)} crossings, "
                f"{len(self.climbs)} climbs: " + "; ".join(climbs))

    def bounces(self, one: str, other: str) -> int:
        """How many times control passed between modules ``one`` and ``other``."""
        pair = {f"{PACKAGE}.{one}", f"{PACKAGE}.{other}"}
        return sum(1 for a, b in self.passes if {a, b} == pair)


def _module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    return name if isinstance(name, str) and (
        name == PACKAGE or name.startswith(PACKAGE + ".")) else None


@contextmanager
def traced(root: Callable[..., Any]) -> Iterator[Walk]:
    """Trace, while the block runs, every call made under ``root``."""
    code: CodeType = root.__code__
    walk = Walk()
    seen: set[str] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        callee = _module(frame)
        if callee is None:
            return
        caller, back, under = None, frame.f_back, frame.f_code is code
        while back is not None:
            if caller is None and (found := _module(back)) is not None:
                caller = found
            if back.f_code is code:
                under = True
                break
            back = back.f_back
        if not under:
            return
        if callee not in seen:
            seen.add(callee)
            walk.modules.append(callee)
        if caller is None or caller == callee:
            return
        edge = (caller, callee, frame.f_code.co_name)
        walk.passes.append((caller, callee))
        walk.crossings.add(edge)
        if rank(callee) < rank(caller):
            walk.climbs.add(edge)

    sys.setprofile(profile)
    try:
        yield walk
    finally:
        sys.setprofile(None)


@dataclass
class Section:
    """How one top-level key of a built document was made: by which functions the builder
    called directly (none: inline in the builder), and whether the builder changed it after
    that function returned it (a translation completed in a second module)."""

    key: str
    makers: list[str]
    patched: bool


def sections(builder: Callable[..., dict[str, Any]], *args: Any) -> list[Section]:
    """Each top-level key of ``builder(*args)`` and what made it: a function called directly
    by the builder makes a key when it returns a dict holding the key, or returns the very
    object the key ends up with (a section body); the key was patched when its final value
    differs from what that function returned."""
    code: CodeType = builder.__code__
    returned: list[tuple[str, Any, Any]] = []  # (maker, object, snapshot)

    def profile(frame: FrameType, event: str, arg: object) -> None:
        back = frame.f_back
        if event == "return" and back is not None and back.f_code is code and isinstance(
                arg, dict) and frame.f_code is not code:
            module = _module(frame) or "?"
            maker = f"{module.removeprefix(PACKAGE + '.')}.{frame.f_code.co_name}"
            returned.append((maker, arg, copy.deepcopy(arg)))

    sys.setprofile(profile)
    try:
        built = builder(*args)
    finally:
        sys.setprofile(None)
    found = []
    for key, value in built.items():
        makers, patched = [], False
        for maker, obj, snapshot in returned:
            if key in snapshot:
                makers.append(maker)
                patched |= snapshot[key] != value
            elif obj is value:
                makers.append(maker)
                patched |= snapshot != value
        found.append(Section(key, makers, patched))
    return found
