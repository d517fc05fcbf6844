"""``make bench``: run every benchmark area in turn, then write docs/PERFORMANCE.md.

``python -m bench`` runs all areas; ``python -m bench recall kg`` runs some. Each area is
its own process (``python -m bench.<area>``) that starts the servers it needs, so one
area's leftovers never skew the next.
"""

from __future__ import annotations

import subprocess
import sys

from bench.summary import write_performance

AREAS = ("hooks", "attest", "recall", "embedders", "policy", "kg", "operator", "recovery",
         "quality", "transcripts", "mcp", "backup", "ha", "writes", "encryption", "audit",
         "spoke_memory", "peer", "longmemeval", "audit_tree", "tiers", "subscriptions",
         "federation")


def main(argv: list[str]) -> int:
    """Run the chosen areas (all by default) and refresh the summary table."""
    chosen = [a for a in argv if not a.startswith("-")] or list(AREAS)
    unknown = sorted(set(chosen) - set(AREAS))
    if unknown:
        print(f"unknown area(s) {unknown}; choose from {list(AREAS)}", file=sys.stderr)
        return 2
    failed = []
    for area in chosen:
        print(f"== bench {area}", flush=True)
        if subprocess.run([sys.executable, "-m", f"bench.{area}"], check=False).returncode:
            failed.append(area)
    path = write_performance()
    print(f"wrote {path}")
    if failed:
        print(f"failed: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
