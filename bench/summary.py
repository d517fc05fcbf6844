"""Builds docs/PERFORMANCE.md from docs/benchmarks/*.json: one table of the headline
figures next to their goals, with the command that produced them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import RESULTS, ROOT

Row = tuple[str, str, str]  # (measure, value, goal)


def _get(data: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(data, dict):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return None
    return data


def _fmt(value: Any, unit: str = "") -> str:
    return "n/a" if value is None else f"{value}{unit}"


def recall_rows(d: dict[str, Any]) -> list[Row]:
    rows = [
        (f"recall p50/p95/p99 at {size} (HTTP)",
         f"{_fmt(_get(d, key, 'p50'))} / {_fmt(_get(d, key, 'p95'))} / "
         f"{_fmt(_get(d, key, 'p99'))} ms", goal)
        for size, key, goal in (("10k", "recall_10k", "p95 <= 10 ms"),
                                ("100k", "recall_100k", "p95 <= 30 ms"))
    ]
    paired = d.get("hook_overhead_10k") or {}
    hooked = _get(paired, "with_daemon_post_recall_hook", "p95")
    plain = _get(paired, "without_hooks", "p95")
    rows.append(("recall p95 at 10k, daemon post_recall hook vs none (paired runs)",
                 f"{_fmt(hooked, ' ms')} vs {_fmt(plain, ' ms')}"
                 f" ({paired['p95_delta_ms']:+} ms; p50 {paired['p50_delta_ms']:+} ms)"
                 if hooked is not None and plain is not None else "n/a",
                 "within 1 ms of no hooks"))
    rows.append(("sequential stores (HTTP, client on the same 2 cores)",
                 _fmt(_get(d, "store", "per_second"), " /s"), ">= 500 /s"))
    rows.append(("sequential stores (service layer, no HTTP)",
                 _fmt(_get(d, "store_service_layer", "per_second"), " /s"), ">= 500 /s"))
    return rows


def kg_rows(d: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for scale in d.get("scales", []):
        label = f"{scale['memories'] // 1000}k/{scale['links'] // 1000}k"
        for backend in ("cte", "age"):
            p95 = [_get(scale, backend, "query", str(depth), "p95_ms") for depth in range(1, 6)]
            rows.append((f"kg/query p95 depth 1..5, {backend}, {label}",
                         " / ".join(_fmt(v) for v in p95) + " ms",
                         "depth 5 <= 25 ms (faster backend, 400k)"))
            rows.append((f"kg/paths p95 5 / 7 hops, {backend}, {label}",
                         f"{_fmt(_get(scale, backend, 'paths', '5', 'p95_ms'))} / "
                         f"{_fmt(_get(scale, backend, 'paths', '7', 'p95_ms'))} ms", ""))
        rows.append((f"AGE/CTE p95 ratio at depth 5, {label}",
                     _fmt(scale.get("age_over_cte_p95_depth5")), "AGE if <= 0.7"))
        if "http_query" in scale:
            http = scale["http_query"]
            rows.append((f"kg/query over HTTP p50 / p95, depth 1 and 5, {label}",
                         f"{_fmt(_get(http, '1', 'p50_ms'))} / {_fmt(_get(http, '1', 'p95_ms'))}"
                         f" and {_fmt(_get(http, '5', 'p50_ms'))} / "
                         f"{_fmt(_get(http, '5', 'p95_ms'))} ms", "recorded"))
    return rows


def attest_rows(d: dict[str, Any]) -> list[Row]:
    return [
        ("sign / verify per link (CPU)",
         f"{_fmt(_get(d, 'crypto', 'encode_and_sign', 'cpu_us'))} / "
         f"{_fmt(_get(d, 'crypto', 'verify', 'cpu_us'))} us", ""),
        ("signed link write p95 (incl. chain append)",
         _fmt(_get(d, "signed_link_write", "serial_latency_ms", "p95"), " ms"), "<= 5 ms"),
        ("signed links per second", _fmt(_get(d, "signed_link_write", "links_per_s"), " /s"),
         ">= 300 /s"),
        ("chain verification",
         _fmt(_get(d, "chain_verification", "chain_only_events_per_s"), " events/s"),
         ">= 20000 events/s"),
    ]


def hooks_rows(d: dict[str, Any]) -> list[Row]:
    r = d.get("results", {})
    return [
        ("daemon hook round trip p50 / p99",
         f"{_fmt(_get(r, 'daemon_round_trip', 'p50_ms'))} / "
         f"{_fmt(_get(r, 'daemon_round_trip', 'p99_ms'))} ms", "<= 0.5 / <= 2 ms"),
        ("exec hook spawn p50", _fmt(_get(r, "exec_spawn", "p50_ms"), " ms"), "recorded"),
        ("fire with no hooks configured p50", _fmt(_get(r, "no_hooks_fire", "p50_ms"), " ms"),
         ""),
    ]


def operator_rows(d: dict[str, Any]) -> list[Row]:
    steady, cold = d.get("steady") or {}, d.get("cold_start") or {}
    count = cold.get("cortexes", 200)
    created = steady.get("children_created_ms") or {}
    status = steady.get("status_observed_ms") or {}
    return [
        (f"MemoryCortex created -> all immediate children exist, p50 / p95 / max "
         f"({_fmt(created.get('n'))} one after another)",
         f"{_fmt(created.get('p50'))} / {_fmt(created.get('p95'))} / "
         f"{_fmt(created.get('max'))} ms", "p95 <= 1000 ms"),
        ("MemoryCortex created -> status observedGeneration current, p50 / p95",
         f"{_fmt(status.get('p50'))} / {_fmt(status.get('p95'))} ms", "recorded"),
        (f"cold start: {count} MemoryCortex reconciled (exec -> last status and children)",
         _fmt(cold.get("all_reconciled_s"), " s"), "<= 60 s"),
        (f"operator RSS with {count} cortexes reconciled (after idle window; peak)",
         f"{_fmt(cold.get('rss_mb_after_idle'), ' MB')}; "
         f"{_fmt(cold.get('rss_mb_peak'), ' MB')}", "<= 150 MB"),
        (f"API writes per minute when idle ({count} cortexes; "
         f"{_fmt(steady.get('cortexes'))} cortexes, "
         f"{_fmt(steady.get('cortexes_ready_before_idle'))} Ready)",
         f"{_fmt(_get(cold, 'idle', 'writes_per_minute'))}; "
         f"{_fmt(_get(steady, 'idle', 'writes_per_minute'))}", "0"),
    ]


BUILDERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "recall": recall_rows, "kg": kg_rows, "attest": attest_rows, "hooks": hooks_rows,
    "operator": operator_rows,
}


def write_performance() -> Path:
    """Regenerate docs/PERFORMANCE.md from whatever result files exist."""
    lines = [
        "# Performance",
        "",
        "Generated by `make bench` (`python -m bench`) from `docs/benchmarks/*.json`; each",
        "file also records the machine, its load average and the command. Goals are the",
        "issues' targets for this 2-core machine.",
        "",
        "| area | measure | value | goal |",
        "|---|---|---|---|",
    ]
    for area, build in BUILDERS.items():
        path = RESULTS / f"{area}.json"
        if not path.exists():
            lines.append(f"| {area} | (not measured yet) | | |")
            continue
        for measure, value, goal in build(json.loads(path.read_text())):
            lines.append(f"| {area} | {measure} | {value} | {goal} |")
    out = ROOT / "docs" / "PERFORMANCE.md"
    out.write_text("\n".join(lines) + "\n")
    return out
