"""A module already in Go's module cache, found without starting ``go``.

``go env GOMODCACHE`` is a process per lookup: the first schema validation of a fast-tier
builder test started one (tests/support/tiers.py fails a fast-tier test that starts a
process). Go's defaults are read instead: ``$GOMODCACHE``, else the first ``$GOPATH`` entry's
``pkg/mod``, else ``~/go/pkg/mod``; the callers fall back to ``go`` when the module is not
there (a cache configured elsewhere, or not downloaded yet).
"""

from __future__ import annotations

import os
import re
from pathlib import Path


def _escaped(module: str) -> str:
    """The module cache's case encoding: an upper-case letter is ``!`` and its lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def cached_module_dir(module: str, version: str) -> Path | None:
    """``<cache>/<module>@<version>`` when that folder exists in Go's default cache."""
    gopath = (os.environ.get("GOPATH") or "").split(os.pathsep)[0] or str(Path.home() / "go")
    cache = Path(os.environ.get("GOMODCACHE") or Path(gopath) / "pkg" / "mod")
    here = cache / f"{_escaped(module)}@{version}"
    return here if here.is_dir() else None
