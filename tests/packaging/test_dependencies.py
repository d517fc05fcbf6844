"""What the code imports and what pyproject.toml declares stay the same set.

An import of a distribution nobody declared works only while some other dependency happens
to pull it in (the MCP SDK's ``mcp-types``, ``httpx2`` and ``starlette`` did): an SDK release
that drops one breaks ``cortexctl`` at run time, not at install. A declared distribution
nothing imports (``psycopg-pool``, ``kmock``, ``pytest-benchmark`` were) is install time,
image size and supply chain for nothing. A private module of a dependency (``mcp.shared.
_httpx_utils`` was) may change in any release. Static: the source is parsed, not imported;
the installed distributions' metadata maps a module to the distribution that ships it.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterator
from functools import cache
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "attested_cortex"
TEST_TREES = (ROOT / "tests", ROOT / "bench", ROOT / "e2e")
FIRST_PARTY = {"attested_cortex", "tests", "bench", "e2e", "hack"}
#: pytest plugins are used through settings, not imports: the setting each one reads.
PLUGIN_SETTINGS = {"pytest-asyncio": "asyncio_mode", "pytest-timeout": "timeout"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement)
    assert match is not None, requirement
    return _normal(match.group(0))


@cache
def _pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _declared(*extras: str) -> set[str]:
    project = _pyproject()["project"]
    assert isinstance(project, dict)
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    return {_requirement_name(r) for r in requirements}


@cache
def _file_imports(path: Path) -> tuple[str, ...]:
    """One file's absolute imports, parsed once for all the tests here (the trees are ~900
    files: parsing them for each test was most of this module's seconds)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return tuple(found)


def _imports(trees: tuple[Path, ...]) -> Iterator[tuple[str, Path]]:
    """Every absolute import's dotted module name (nested and lazy ones too), with its file."""
    for tree in trees:
        for path in sorted(tree.rglob("*.py")):
            yield from ((module, path) for module in _file_imports(path))


def _third_party(trees: tuple[Path, ...]) -> dict[str, set[str]]:
    """Third-party top-level module -> the files importing it."""
    found: dict[str, set[str]] = {}
    for module, path in _imports(trees):
        top = module.partition(".")[0]
        if top not in FIRST_PARTY and top not in sys.stdlib_module_names:
            found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def _installed() -> dict[str, list[str]]:
    """Top-level module -> distributions; reading every installed distribution's metadata
    once, not once per imported module."""
    return dict(packages_distributions())


def _distributions(module: str) -> set[str]:
    return {_normal(d) for d in _installed().get(module, [])}


def _undeclared(trees: tuple[Path, ...], declared: set[str]) -> dict[str, list[str]]:
    return {
        module: sorted(files) for module, files in _third_party(trees).items()
        if not _distributions(module) & declared
    }


def test_the_package_imports_only_what_it_declares() -> None:
    assert _undeclared((PACKAGE,), _declared()) == {}


def test_tests_and_benchmarks_import_only_what_is_declared() -> None:
    assert _undeclared(TEST_TREES, _declared("test")) == {}


def test_every_runtime_dependency_is_imported_by_the_package() -> None:
    imported = {d for m in _third_party((PACKAGE,)) for d in _distributions(m)}
    assert _declared() - imported == set()


def test_every_test_dependency_is_imported_or_configured() -> None:
    imported = {d for m in _third_party(TEST_TREES) for d in _distributions(m)}
    options = _pyproject()["tool"]["pytest"]["ini_options"]  # type: ignore[index]
    configured = {plugin for plugin, setting in PLUGIN_SETTINGS.items() if setting in options}
    assert _declared("test") - _declared() - imported - configured == set()


def test_no_private_module_of_a_dependency_is_imported() -> None:
    private = sorted(
        f"{path.relative_to(ROOT)}: {module}"
        for module, path in _imports((PACKAGE, *TEST_TREES))
        if module.partition(".")[0] not in FIRST_PARTY | set(sys.stdlib_module_names)
        and any(part.startswith("_") for part in module.split(".")[1:])
    )
    assert private == []
