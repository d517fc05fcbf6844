"""The Go modules whose files the tests read (CloudNativePG's and cert-manager's CRDs), found
in Go's module cache without starting ``go``.

``make deps`` downloads them (``python -m tests.support.gomodules``, a few seconds), so the
fast tier, which may start no process, finds them on a fresh machine too: a cold CI run
showed its builder tests starting ``go env`` and ``go mod download`` otherwise. Go's defaults
are read: ``$GOMODCACHE``, else the first ``$GOPATH`` entry's ``pkg/mod``, else
``~/go/pkg/mod``. A module that is not there skips its test with the command that fetches it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attested_cortex.controller.memorycortex.cloudnativepg import RELEASE as CNPG_RELEASE
from attested_cortex.controller.memorycortex.tls import CERT_MANAGER_RELEASE

CNPG = ("github.com/cloudnative-pg/cloudnative-pg", f"v{CNPG_RELEASE}")
CERT_MANAGER = ("github.com/cert-manager/cert-manager", f"v{CERT_MANAGER_RELEASE}")
NEEDED = (CNPG, CERT_MANAGER)


def _escaped(module: str) -> str:
    """The module cache's case encoding: an upper-case letter is ``!`` and its lower case."""
    return re.sub(r"[A-Z]", lambda m: "!" + m.group(0).lower(), module)


def _cache() -> Path:
    gopath = (os.environ.get("GOPATH") or "").split(os.pathsep)[0] or str(Path.home() / "go")
    return Path(os.environ.get("GOMODCACHE") or Path(gopath) / "pkg" / "mod")


def cached_module_dir(module: str, version: str) -> Path | None:
    """``<cache>/<module>@<version>`` when that folder exists in Go's default cache."""
    here = _cache() / f"{_escaped(module)}@{version}"
    return here if here.is_dir() else None


def module_dir(module: str, version: str) -> Path:
    """The module's folder; the calling test is skipped, naming the fix, when it is absent."""
    found = cached_module_dir(module, version)
    if found is None:
        pytest.skip(f"{module}@{version} is not in Go's module cache ({_cache()}): "
                    "`make deps` downloads it (python -m tests.support.gomodules)")
    return found


def download() -> int:
    """Fetch every module of NEEDED that is not cached yet (``go mod download``)."""
    for module, version in NEEDED:
        if cached_module_dir(module, version) is None:
            print(f"gomodules: downloading {module}@{version}", flush=True)
            subprocess.run(["go", "mod", "download", f"{module}@{version}"], check=True,
                           env={**os.environ, "GOFLAGS": "-mod=mod"})
        if cached_module_dir(module, version) is None:
            print(f"gomodules: {module}@{version} is not under {_cache()} after the download"
                  " (is GOMODCACHE set in go's own env file? export it)", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(download())
