"""``python -m bench tiers``: how long ``make test-fast`` takes (issue 43: under 60 s on the
2-core machine), wall and CPU, with the load the neighbours put on the machine beside it.

The selection is read from the Makefile's ``FAST_TIER`` (one source); pytest runs as a child,
so its CPU (user + sys, its own children included) is read from ``RUSAGE_CHILDREN``: the
figure that does not depend on other runs sharing the cores, while the wall time does.
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import time

from bench.common import ROOT, write_result


def fast_tier() -> str:
    """The marker expression ``make test-fast`` selects, with ``$(LOCAL_TIER)`` expanded."""
    text = (ROOT / "Makefile").read_text()
    values = dict(re.findall(r"^([A-Z_]+) := (.*)$", text, re.M))
    return re.sub(r"\$\(([A-Z_]+)\)", lambda m: values[m.group(1)], values["FAST_TIER"])


def main() -> int:
    selection = fast_tier()
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-m", selection], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    wall = time.monotonic() - began
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr[-500:]
    passed = re.search(r"(\d+) passed", summary)
    print(summary)
    write_result("tiers", {"fast": {
        "selection": selection, "summary": summary,
        "passed": int(passed.group(1)) if passed else None, "exit_code": run.returncode,
        "wall_seconds": round(wall, 1), "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "load_average_before": round(load_before, 2)}})
    return run.returncode


if __name__ == "__main__":
    raise SystemExit(main())
