"""Every condition reason the reconcilers can set is classified, once (builders/reasons.py).

The reasons are read from the code itself: the third argument of ``Observation`` and
``Observation.of``, the ``reason=`` / ``ready_reason=`` / ``invalid_reason=`` keywords and the
``reason`` parameter of our own functions, followed through literals, conditional
expressions, module constants, local assignments and dict lookups. A new reason that is not
in the table fails here (before, it silently read as a failure); a table entry nothing sets
fails too. Pure: no service, well under a second.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from attested_cortex.builders.conditions import Observation, kstatus, ready
from attested_cortex.builders.reasons import MOVING, REASONS, TRANSITIONS, Health
from attested_cortex.controller.statuses import summarise

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "attested_cortex"
KEYWORDS = {"reason", "ready_reason", "invalid_reason"}
#: Calls whose ``reason`` is an event's, not a condition's.
EVENT_CALLS = {"post_event"}


class _Reasons:
    """The string values reachable from reason positions in ``builders/`` and ``controller/``."""

    def __init__(self) -> None:
        paths = sorted([*(PACKAGE / "builders").rglob("*.py"),
                        *(PACKAGE / "controller").rglob("*.py")])
        self.trees = {path: ast.parse(path.read_text()) for path in paths}
        self.constants: dict[tuple[Path | None, str], ast.expr] = {}
        self.params: dict[str, list[str]] = {}
        self.parent: dict[ast.AST, ast.AST] = {}
        for path, tree in self.trees.items():
            for node in tree.body:
                if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if isinstance(target, ast.Name):
                            self.constants.setdefault((path, target.id), node.value)
                            self.constants.setdefault((None, target.id), node.value)
            for node in ast.walk(tree):
                for child in ast.iter_child_nodes(node):
                    self.parent[child] = node
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    names = [a.arg for a in node.args.args if a.arg not in ("self", "cls")]
                    self.params.setdefault(node.name, names)

    def found(self) -> dict[str, set[str]]:
        """Reason -> the modules that set it."""
        found: dict[str, set[str]] = {}
        for path, tree in self.trees.items():
            for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
                for expr in self._reason_arguments(call):
                    for value in self._values(expr, path, 0):
                        found.setdefault(value, set()).add(str(path.relative_to(PACKAGE)))
        return found

    def _reason_arguments(self, call: ast.Call) -> Iterator[ast.expr]:
        callee = ast.unparse(call.func)
        name = callee.rsplit(".", 1)[-1]
        if name in EVENT_CALLS:
            return
        if callee in ("Observation", "Observation.of") and len(call.args) >= 3:
            yield call.args[2]
        params = self.params.get(name, [])
        if "reason" in params and params.index("reason") < len(call.args):
            yield call.args[params.index("reason")]
        yield from (kw.value for kw in call.keywords if kw.arg in KEYWORDS)

    def _values(self, expr: ast.expr | None, path: Path, depth: int) -> set[str]:
        if expr is None or depth > 6:
            return set()
        match expr:
            case ast.Constant(value=str(value)):
                return {value}
            case ast.IfExp(body=body, orelse=orelse):
                return self._values(body, path, depth + 1) | self._values(orelse, path, depth + 1)
            case ast.Dict(values=values):
                return set().union(*(self._values(v, path, depth + 1) for v in values))
            case ast.Subscript(value=ast.Name(id=table)):
                return self._values(self.constants.get((path, table)), path, depth + 1)
            case ast.Attribute(attr=attr):
                return self._values(self.constants.get((None, attr)), path, depth + 1)
            case ast.Name(id=name):
                if (path, name) in self.constants:
                    return self._values(self.constants[(path, name)], path, depth + 1)
                return self._local(expr, name, path, depth)
        return set()

    def _local(self, at: ast.AST, name: str, path: Path, depth: int) -> set[str]:
        node: ast.AST | None = at
        while node is not None and not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            node = self.parent.get(node)
        if node is None:
            return set()
        return set().union(*(self._values(a.value, path, depth + 1) for a in ast.walk(node)
                             if isinstance(a, ast.Assign)
                             and any(isinstance(t, ast.Name) and t.id == name
                                     for t in a.targets)))


def test_every_reason_the_reconcilers_set_is_classified_and_nothing_else() -> None:
    found = _Reasons().found()
    unclassified = {reason: sorted(where) for reason, where in found.items()
                    if reason not in REASONS}
    assert unclassified == {}, "classify these in builders/reasons.py"
    assert sorted(set(REASONS) - set(found)) == [], "nothing sets these: remove them"
    # the scan reaches the indirect cases: a local variable, a dict, another module's constant
    assert {"MigrationFailed", "DuplicateKey", "BackupFailed"} <= set(found)


@pytest.mark.parametrize("reason", sorted(REASONS))
def test_each_reason_gives_the_kstatus_conditions_and_the_event_of_its_class(reason: str) -> None:
    meaning = REASONS[reason]
    if meaning.health is Health.READY:
        summary = ready([Observation("Part", "True", reason, "as asked")], ready_reason=reason)
        assert [(o.type, o.status) for o in kstatus(summary, MOVING)] == [
            ("Reconciling", "False"), ("Stalled", "False")]
        return
    summary = ready([Observation("Part", "False", reason, "not yet")])
    derived = {o.type: o.status for o in kstatus(summary, MOVING)}
    moving = meaning.health is Health.RECONCILING
    assert derived == {"Reconciling": "True" if moving else "False",
                       "Stalled": "False" if moving else "True"}
    event = summarise([{"type": "Part", "status": "False", "reason": reason, "message": "m"}])
    assert event["type_"] == ("Warning" if meaning.warns else "Normal")
    assert (reason in TRANSITIONS) is (not meaning.warns)
