"""Builds docs/PERFORMANCE.md from docs/benchmarks/*.json: one table of the headline
figures next to their goals, with the command that produced them."""

from __future__ import annotations

import ast
import contextlib
import json
import re
import types
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
        (f"recall p50/p95/p99 at {size} (HTTP, {mode})",
         f"{_fmt(_get(d, key, 'p50'))} / {_fmt(_get(d, key, 'p95'))} / "
         f"{_fmt(_get(d, key, 'p99'))} ms", goal)
        for size, key, mode, goal in (
            ("10k", "recall_10k", "full-text only", "p95 <= 10 ms"),
            ("100k", "recall_100k", "full-text only", "p95 <= 30 ms"),
            ("10k", "hybrid_recall_10k", "hybrid, query embedding included", "p95 <= 15 ms"),
            ("100k", "hybrid_recall_100k", "hybrid, query embedding included",
             "p95 <= 20 ms"))
        if key in d
    ]
    for size in ("10k", "100k"):
        rare = d.get(f"rarest_words_{size}")
        if rare:
            rows.append((f"three-rarest-words queries R@5 at {size}, hybrid / full-text",
                         f"{_fmt(_get(rare, 'hybrid', 'r@5'))} / "
                         f"{_fmt(_get(rare, 'fulltext', 'r@5'))} "
                         f"(n={_fmt(_get(rare, 'hybrid', 'n'))})",
                         ">= 0.98 at 100k"))
            if _get(rare, "hybrid", "latency_ms"):
                rows.append((f"three-rarest-words (rare-word) queries p50 / p95 at {size}, "
                             "hybrid / full-text (HTTP)",
                             f"{_fmt(_get(rare, 'hybrid', 'latency_ms', 'p50'))} / "
                             f"{_fmt(_get(rare, 'hybrid', 'latency_ms', 'p95'))} ms; "
                             f"{_fmt(_get(rare, 'fulltext', 'latency_ms', 'p50'))} / "
                             f"{_fmt(_get(rare, 'fulltext', 'latency_ms', 'p95'))} ms",
                             "recorded (the common-word set: the rows above)"))
    emb = d.get("embedder")
    if emb:
        rows.append((f"embedded default embedder ({emb['model']}, {emb['dimension']} dims): "
                     "query embed p50 / p95; load; batch rate",
                     f"{_fmt(_get(emb, 'query_embed_ms', 'p50'))} / "
                     f"{_fmt(_get(emb, 'query_embed_ms', 'p95'))} ms; "
                     f"{_fmt(emb.get('load_seconds_first_in_process'), ' s')}; "
                     f"{_fmt(emb.get('memories_per_second_batches_of_64'), ' memories/s')}",
                     "recorded"))
    for size in ("10k", "100k"):
        fill = d.get(f"backfill_{size}")
        if fill:
            rows.append((f"background backfill of a bulk-loaded {size} (server, HTTP idle)",
                         f"{fill['embedded']} in {fill['seconds']} s "
                         f"({_fmt(fill['per_second'], ' /s')})", "recorded"))
    paired = d.get("hook_overhead_10k") or {}
    hooked = _get(paired, "with_daemon_post_recall_hook", "p95")
    plain = _get(paired, "without_hooks", "p95")
    rows.append(("recall p95 at 10k, daemon post_recall hook vs none (paired runs)",
                 f"{_fmt(hooked, ' ms')} vs {_fmt(plain, ' ms')}"
                 f" ({paired['p95_delta_ms']:+} ms; p50 {paired['p50_delta_ms']:+} ms)"
                 if hooked is not None and plain is not None else "n/a",
                 "within 1 ms of no hooks"))
    behind = _get(d, "store", "embedded_behind_after_s")
    rows.append(("sequential stores (HTTP, client on the same 2 cores)"
                 + (", hybrid" if "store_fulltext" in d else "")
                 + (", write-behind embedding: stores/s; all embedded after the last store; "
                    "stores embedded/s" if behind is not None else ""),
                 _fmt(_get(d, "store", "per_second"), " /s")
                 + (f"; +{behind} s; {_fmt(_get(d, 'store', 'embedded_per_second'), ' /s')}"
                    if behind is not None else ""), ">= 500 /s"))
    if "store_inline" in d:
        rows.append(("sequential stores (HTTP), hybrid, embedding.write_queue 0 (embedded on "
                     "write)", _fmt(_get(d, "store_inline", "per_second"), " /s"),
                     "recorded"))
    if "store_fulltext" in d:
        rows.append(("sequential stores (HTTP), --embedder none; hybrid / none ratio",
                     f"{_fmt(_get(d, 'store_fulltext', 'per_second'), ' /s')}; "
                     f"{_fmt(d.get('store_hybrid_ratio'))}", "ratio >= 0.8"))
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
        if "http_over_db_p95_depth5" in scale:
            rows.append((f"kg/query depth 5 p95, HTTP vs the query in the database (paired), "
                         f"{label}",
                         f"{_fmt(_get(scale, 'http_query', '5', 'p95_ms'))} vs "
                         f"{_fmt(_get(scale, 'http_query', 'db_paired', '5', 'p95_ms'))} ms "
                         f"(x{_fmt(scale['http_over_db_p95_depth5'])}); the query alone "
                         f"earlier in the run (cte): "
                         f"x{_fmt(scale.get('http_over_cte_alone_p95_depth5'))}", "<= x2"))
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
        ("daemon round trip, ten recall hits, back to back / after 10 ms idle: p50 / p95",
         f"{_fmt(_get(r, 'daemon_round_trip_recall_payload', 'p50_ms'))} / "
         f"{_fmt(_get(r, 'daemon_round_trip_recall_payload', 'p95_ms'))} and "
         f"{_fmt(_get(r, 'daemon_round_trip_recall_payload_after_10ms_idle', 'p50_ms'))} / "
         f"{_fmt(_get(r, 'daemon_round_trip_recall_payload_after_10ms_idle', 'p95_ms'))} ms",
         "recorded"),
        ("exec hook spawn p50", _fmt(_get(r, "exec_spawn", "p50_ms"), " ms"), "recorded"),
        ("fire with no hooks configured p50", _fmt(_get(r, "no_hooks_fire", "p50_ms"), " ms"),
         ""),
    ]


def recovery_rows(d: dict[str, Any]) -> list[Row]:
    s = d.get("summary", {})
    rounds = len(d.get("rounds", []))
    return [
        (f"readyz 503 after the database went away (worst of {rounds})",
         _fmt(s.get("readyz_503_after_s_max"), " s"), "<= 1 s"),
        (f"readyz 200 after the database came back (worst of {rounds})",
         _fmt(s.get("readyz_200_after_s_max"), " s"), "<= 2 s"),
        ("a write while the database stays away answers 503 after (the server's wait for "
         "it, db_reconnect_wait_ms: 8 s, ADR 0126)",
         _fmt(s.get("write_during_outage_max_ms"), " ms"), "<= 8500 ms"),
        ("failed requests right after an idle restart",
         f"{_fmt(s.get('idle_restart_failed_requests'))} of "
         f"{_fmt(s.get('idle_restart_requests'))}", "0"),
    ]


def ha_rows(d: dict[str, Any]) -> list[Row]:
    f = d.get("failover", {})
    single, ha = d.get("single", {}), d.get("ha", {})
    size = d.get("size")
    return [
        (f"write unavailability on primary deletion, p50 / max of {_fmt(f.get('failovers'))} "
         "(3-instance CloudNativePG, 1 synchronous replica)",
         f"{_fmt(_get(f, 'gap_s', 'p50'))} / {_fmt(_get(f, 'gap_s', 'max'))} s", "<= 30 s"),
        ("write gap beyond CloudNativePG's promotion (the -rw Service's endpoint moving, the "
         "surviving replica following, the server's reconnect), p50 / max",
         f"{_fmt(_get(f, 'beyond_promotion_s', 'p50'))} / "
         f"{_fmt(_get(f, 'beyond_promotion_s', 'max'))} s", "<= 2 s"),
        ("acknowledged writes lost across those failovers",
         f"{_fmt(f.get('acknowledged_lost'))} of {_fmt(f.get('acknowledged_writes'))} "
         f"({_fmt(f.get('duplicated'))} duplicated)", "0"),
        (f"sequential stores/s at {size}, 3-instance synchronous vs managed single pod",
         f"{_fmt(ha.get('stores_per_second'))} vs {_fmt(single.get('stores_per_second'))} /s "
         f"(ratio {_fmt(d.get('store_throughput_ratio_ha_over_single'))})", "recorded"),
        (f"recall p95 at {size}, 3-instance synchronous vs managed single pod",
         f"{_fmt(_get(ha, 'recall_ms', 'p95'))} vs {_fmt(_get(single, 'recall_ms', 'p95'))} ms",
         "recorded"),
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
        ("cold start CPU s: operator / kube-apiserver / etcd; machine cores busy (shared)",
         f"{_fmt(_get(cold, 'cpu_until_reconciled', 'cpu_s_by_process', 'python'))} / "
         f"{_fmt(_get(cold, 'cpu_until_reconciled', 'cpu_s_by_process', 'kube-apiserver'))} / "
         f"{_fmt(_get(cold, 'cpu_until_reconciled', 'cpu_s_by_process', 'etcd'))}; "
         f"{_fmt(_get(cold, 'cpu_until_reconciled', 'machine_busy_cores'))} of "
         f"{_fmt(_get(d, 'machine', 'cpus'))}", "recorded"),
        (f"operator RSS with {count} cortexes reconciled (after idle window; peak)",
         f"{_fmt(cold.get('rss_mb_after_idle'), ' MB')}; "
         f"{_fmt(cold.get('rss_mb_peak'), ' MB')}", "<= 150 MB"),
        (f"API writes per minute when idle ({count} cortexes; "
         f"{_fmt(steady.get('cortexes'))} cortexes, "
         f"{_fmt(steady.get('cortexes_ready_before_idle'))} Ready)",
         f"{_fmt(_get(cold, 'idle', 'writes_per_minute'))}; "
         f"{_fmt(_get(steady, 'idle', 'writes_per_minute'))}", "0"),
    ]


def policy_rows(d: dict[str, Any]) -> list[Row]:
    paired = d.get("recall_10k") or {}
    ruled = _get(paired, "with_200_rules_and_scopes", "p95")
    plain = _get(paired, "without_policy", "p95")
    return [(f"recall p95 at 10k, {d.get('rules')} rules + scoped token vs none (paired runs)",
             f"{_fmt(ruled, ' ms')} vs {_fmt(plain, ' ms')}"
             f" ({paired['p95_delta_ms']:+} ms; p50 {paired['p50_delta_ms']:+} ms)"
             if ruled is not None and plain is not None else "n/a",
             "within 1 ms of none"),
            ("CPU of scope + rules + read isolation per recall (in process, 10 hits)",
             f"{_fmt(_get(d, 'policy_cpu', 'per_recall_us_best_of_5'), ' us')} best of 5",
             "recorded")]


def mcp_rows(d: dict[str, Any]) -> list[Row]:
    paired = d.get("recall_10k") or {}
    rows: list[Row] = []
    for name, label in (("mcp_session", "tools/call on a session, same HTTP client"),
                        ("mcp_sdk_modern", "the SDK client, 2026-07-28 envelope"),
                        ("mcp_sdk_session", "the SDK client, handshake session")):
        if name in paired:
            rows.append((f"memory_recall p50 / p95 at 10k over MCP ({label}) vs POST "
                         "/v1/recall (paired runs)",
                         f"{paired[name]['p50']} / {paired[name]['p95']} ms vs "
                         f"{paired['http']['p50']} / {paired['http']['p95']} ms "
                         f"(p95 {paired[name + '_p95_delta_ms']:+} ms"
                         + (f"; {paired[name + '_vs_httpx2_p95_delta_ms']:+} ms vs the same "
                            "route through the SDK's HTTP library"
                            if name + "_vs_httpx2_p95_delta_ms" in paired else "")
                         + f"; load {paired.get('load_average')})",
                         "p95 overhead <= 2 ms" if name == "mcp_session" else "recorded"))
    diff = _get(paired, "mcp_session_paired_difference_ms")
    if diff:
        rows.append(("memory_recall at 10k, MCP minus HTTP for the same query sent back to "
                     "back (tools/call on a session): p50 / p95 of the difference",
                     f"{diff['p50']} / {diff['p95']} ms", "recorded"))
    cpu = d.get("server_cpu_per_recall_10k")
    if cpu:
        rows.append(("server CPU per memory_recall at 10k: POST /v1/recall vs tools/call on a "
                     "session (best of rounds)",
                     f"{cpu['http_ms']} vs {cpu['mcp_session_ms']} ms "
                     f"(MCP adds {cpu['mcp_added_ms']} ms)", "recorded"))
    mounts = d.get("mounts_2k") or {}
    parts = [f"{name} {mounts[name]['p50']} / {mounts[name]['p95']}"
             for name in ("bridge_json", "bridge_sse", "aiohttp_asgi_json", "http")
             if isinstance(mounts.get(name), dict)]
    if parts:
        rows.append(("/mcp mounts, memory_recall at 2k p50 / p95 ms (ADR 0012)",
                     "; ".join(parts), "recorded"))
    return rows


def quality_rows(d: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for kind in ("lexical", "paraphrase"):
        part = d.get(kind) or {}
        for mode in ("fulltext", "vector", "hybrid"):
            s = part.get(mode) or {}
            rows.append((f"{kind} queries (n={s.get('n')}), {mode}: R@1 / R@5 / R@10 / MRR",
                         f"{s.get('r@1')} / {s.get('r@5')} / {s.get('r@10')} / "
                         f"{s.get('mrr')}", ""))
        gain = part.get("hybrid_minus_fulltext_r@5")
        goal = ">= +0.10" if kind == "paraphrase" else ">= 0 (loses nothing)"
        rows.append((f"{kind}: hybrid minus full-text R@5", _fmt(gain), goal))
    for label, run in (("default", d), ("minilm", d.get("minilm") or {})):
        if not run.get("embedder"):
            continue
        for kind, goal in (("paraphrase", ">= 0.5 (the MiniLM goal)"), ("lexical", ">= 0.98")):
            rows.append((f"{label} embedder ({run['embedder']}), {kind} hybrid R@5 / MRR; "
                         "held-out set",
                         f"{_get(run, kind, 'hybrid', 'r@5')} / "
                         f"{_get(run, kind, 'hybrid', 'mrr')}; "
                         f"{_get(run, 'heldout', kind, 'hybrid', 'r@5')} / "
                         f"{_get(run, 'heldout', kind, 'hybrid', 'mrr')} "
                         f"(n={_get(run, 'heldout', kind, 'hybrid', 'n')})",
                         goal + ("; held-out >= 0.8" if kind == "paraphrase" else "")))
        rows.extend(hook_rows(label, run))
    return rows


def hook_rows(label: str, run: dict[str, Any]) -> list[Row]:
    """The reference reranker and query expansion hooks against the same server without
    hooks, query by query (docs/adr/0071)."""
    rows: list[Row] = []
    for variant, part in (run.get("hooks") or {}).items():
        def pair(*path: str, p: dict[str, Any] = part) -> str:
            return f"{_get(p, 'off', *path)} -> {_get(p, 'on', *path)}"

        rows.append((
            f"{label} embedder, hooks {variant} (off -> on, paired): paraphrase R@5 / MRR; "
            "held-out paraphrase R@5 / MRR; lexical R@5 / MRR",
            f"{pair('paraphrase', 'r@5')} / {pair('paraphrase', 'mrr')}; "
            f"{pair('heldout', 'paraphrase', 'r@5')} / {pair('heldout', 'paraphrase', 'mrr')}; "
            f"{pair('lexical', 'r@5')} / {pair('lexical', 'mrr')}", "recorded"))
        rows.append((
            f"{label} embedder, hooks {variant}: recall p50 / p95 over HTTP, off vs on "
            f"(load {_get(part, 'load_average_before', 0)})",
            f"{_get(part, 'recall_ms_off', 'p50')} / {_get(part, 'recall_ms_off', 'p95')} vs "
            f"{_get(part, 'recall_ms_on', 'p50')} / {_get(part, 'recall_ms_on', 'p95')} ms",
            "recorded"))
    return rows


def transcripts_rows(d: dict[str, Any]) -> list[Row]:
    level3 = _get(d, "zstd_levels", "3") or {}
    store, replay = d.get("store_http") or {}, d.get("replay_http") or {}
    return [
        (f"zstd level 3 ratio on {_get(d, 'corpus', 'dialogues')} dialogues (per-dialogue "
         "p5 / p50 / p95)", f"{_fmt(level3.get('ratio'))}x "
         f"({' / '.join(str(v) for v in level3.get('ratio_per_dialogue_p5_p50_p95', []))})",
         "recorded"),
        ("zstd level 3 compress / inflate, one core",
         f"{_fmt(level3.get('compress_mb_per_s'))} / {_fmt(level3.get('inflate_mb_per_s'))} MB/s",
         "recorded"),
        ("transcript stores (HTTP, sequential): rate; p50 / p95",
         f"{_fmt(store.get('per_second'), ' /s')} ({_fmt(store.get('raw_mb_per_s'))} MB/s); "
         f"{_fmt(_get(store, 'latency_ms', 'p50'))} / {_fmt(_get(store, 'latency_ms', 'p95'))} ms",
         "recorded"),
        ("replay of 3 cited spans / full transcript (HTTP): p50 / p95",
         f"{_fmt(_get(replay, 'spans', 'latency_ms', 'p50'))} / "
         f"{_fmt(_get(replay, 'spans', 'latency_ms', 'p95'))} ms; "
         f"{_fmt(_get(replay, 'full', 'latency_ms', 'p50'))} / "
         f"{_fmt(_get(replay, 'full', 'latency_ms', 'p95'))} ms", "recorded"),
    ]


def encryption_rows(d: dict[str, Any]) -> list[Row]:
    store, replay = d.get("store_http") or {}, d.get("replay_http") or {}
    sealing, blinding = d.get("sealing_in_process") or {}, d.get("blinding_in_process") or {}

    def both(part: dict[str, Any], *path: str) -> str:
        return " vs ".join(_fmt(_get(part, mode, *path)) for mode in ("on", "off"))

    load = d.get("load_average_before") or [None]
    return [
        ("transcript stores with encryption at rest on vs off (HTTP, sequential, "
         "alternating; cost)", f"{both(store, 'per_second_sequential')} /s "
         f"({_fmt(d.get('store_cost_percent'))}%); p95 {both(store, 'latency_ms', 'p95')} "
         f"ms; load {_fmt(None if load[0] is None else round(load[0], 1))}", "<= 15% cost"),
        ("full replay with encryption on vs off (HTTP): p50; p95",
         f"{both(replay, 'latency_ms', 'p50')}; {both(replay, 'latency_ms', 'p95')} ms",
         "recorded"),
        ("ChaCha20-Poly1305 seal / open of zstd frames, one core",
         f"{_fmt(sealing.get('seal_mb_per_s'))} / {_fmt(sealing.get('open_mb_per_s'))} MB/s "
         f"({_fmt(sealing.get('seal_us_per_frame'))} us a frame)", "recorded"),
        ("re-sealing under a new key version (rotation, server start included)",
         f"{_fmt(_get(d, 'reseal', 'frames'))} frames in {_fmt(_get(d, 'reseal', 'seconds'))} s "
         f"({_fmt(_get(d, 'reseal', 'frames_per_s'))} frames/s)", "recorded"),
        ("blind full-text tokens (HMAC of each lexeme), one core",
         f"{_fmt(blinding.get('memories_per_s'))} memories/s "
         f"({_fmt(blinding.get('us_per_memory'))} us a memory)", "recorded"),
        *_sealed_memory_rows(d.get("memories") or {}, d.get("reseal") or {}),
    ]


def _sealed_memory_rows(m: dict[str, Any], reseal: dict[str, Any]) -> list[Row]:
    """Memories sealed at rest vs plain (ADR 0065), alternating in one run."""
    def both(part: dict[str, Any], *path: str) -> str:
        return " vs ".join(_fmt(_get(part, mode, *path)) for mode in ("on", "off"))

    rows: list[Row] = []
    for size, part in sorted((m.get("sizes") or {}).items(), key=lambda kv: int(kv[0])):
        recall = part.get("recall_http") or {}
        load = recall.get("load_average") or [None]
        rows.append((
            f"memory recall at {int(size) // 1000}k, memories sealed vs plain (HTTP, "
            "full-text, alternating): p95 (cost); same answers",
            f"{both(recall, 'latency_ms', 'p95')} ms ({_fmt(recall.get('p95_cost_percent'))}%)"
            f"; {recall.get('same_answers')}; load {_fmt(load[0])}", "<= 15% cost"))
        batch = part.get("batch_store_http") or {}
        if batch:
            rows.append((
                f"memory batch stores at {int(size) // 1000}k, sealed vs plain (HTTP, "
                "POST /v1/memories:batch of 1000, alternating; cost)",
                f"{both(batch, 'memories_per_s')} memories/s "
                f"({_fmt(batch.get('cost_percent'))}%); load {_fmt(batch.get('load_average'))}",
                "<= 15% cost"))
    store = m.get("store_http") or {}
    if store:
        rows.append((
            "memory stores sealed vs plain (HTTP, sequential, alternating; cost)",
            f"{both(store, 'per_second_sequential')} /s ({_fmt(store.get('cost_percent'))}%)"
            f"; p95 {both(store, 'latency_ms', 'p95')} ms", "<= 15% cost"))
    if reseal.get("memories"):
        rows.append((
            "memories re-sealed under a new key version (rotation, tokens re-keyed)",
            f"{_fmt(reseal.get('memories'))} memories at {_fmt(reseal.get('memories_per_s'))}"
            f"/s (batch {_fmt(reseal.get('batch'))})", "recorded"))
    return rows


def embedders_rows(d: dict[str, Any]) -> list[Row]:
    rows: list[Row] = []
    for name in ("default", "minilm"):
        m = d.get(name)
        if m:
            rows.append((f"{name} embedder ({m['model']}, {m['dimension']} dims, one core): "
                         "query p50 / p95; batch rate; cold load; RSS added; installed",
                         f"{_fmt(_get(m, 'query_embed_ms', 'p50'))} / "
                         f"{_fmt(_get(m, 'query_embed_ms', 'p95'))} ms; "
                         f"{_fmt(m.get('memories_per_second_batches_of_64'), ' /s')}; "
                         f"{_fmt(m.get('cold_load_seconds'), ' s')}; "
                         f"{_fmt(m.get('rss_mb_added'), ' MB')}; "
                         f"{_fmt(m.get('installed_mb'), ' MB')}",
                         "RSS <= +300 MB" if name == "minilm" else "recorded"))
    return rows


_TIMELINE = re.compile(r"^\+\s*(-?[0-9.]+) s (.*)$")


def backup_phases(backup: dict[str, Any]) -> dict[str, float | None]:
    """Where one on-demand backup's time went, from the instance's log lines that
    bench/backup_physical.py keeps (seconds after the Backup was created): ``queued`` until
    barman-cloud-backup starts (CloudNativePG runs one backup at a time), ``checkpoint``
    until the checkpoint the backup asked for completes (a checkpoint already running is
    waited for first), ``upload`` until barman-cloud-backup completes (the base files, then
    the WAL up to the backup's end archived; the Backup's own stoppedAt where the log line
    is missing)."""
    started = forced = checkpointed = completed = None
    for line in backup.get("timeline") or []:
        found = _TIMELINE.match(line)
        if found is None:
            continue
        at, text = float(found.group(1)), found.group(2)
        if started is None and "Starting barman-cloud-backup" in text:
            started = at
        elif started is not None and forced is None and "checkpoint starting:" in text \
                and "force" in text:
            forced = at
        elif forced is not None and checkpointed is None and "checkpoint complete" in text:
            checkpointed = at
        elif checkpointed is not None and completed is None and \
                "Completed barman-cloud-backup" in text:
            completed = at

    own = backup.get("backup_status") or {}
    if completed is None and own.get("barman_s") is not None:  # its log line cut off
        completed = float(own["started_after_s"]) + float(own["barman_s"])

    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(b - a, 1)
    return {"queued": started, "checkpoint": span(started, checkpointed),
            "upload": span(checkpointed, completed)}


def checkpoint_kind(backup: dict[str, Any]) -> str:
    """Which checkpoint the backup asked for, as PostgreSQL logged it."""
    immediate = any("checkpoint starting: immediate" in line
                    for line in backup.get("timeline") or [])
    return "immediate" if immediate else "spread"


def physical_rows(p: dict[str, Any]) -> list[Row]:
    """The physical path (bench/backup_physical.py), when measured."""
    if not p:
        return []
    size, spread, burst = p.get("size_memories"), p.get("backup") or {}, (
        p.get("backup_immediate_checkpoint") or {})
    restore = p.get("restore") or {}
    slow, fast = backup_phases(spread), backup_phases(burst)
    return [
        (f"physical backup of {_fmt(size)} memories (barman-cloud to MinIO on the node, "
         f"{checkpoint_kind(spread)} checkpoint): created -> completed; of which queued "
         "behind a running backup / checkpoint / upload and end of WAL archived",
         f"{_fmt(spread.get('seconds'), ' s')}; {_fmt(slow['queued'])} / "
         f"{_fmt(slow['checkpoint'])} / {_fmt(slow['upload'])} s "
         f"(load {_fmt(_get(p, 'load_average_before', 0))} -> "
         f"{_fmt(_get(spread, 'load_average_after', 0))})", "recorded"),
        (f"physical backup, same data, {checkpoint_kind(burst)} checkpoint: created -> "
         "completed; queued / checkpoint / upload and end of WAL archived",
         f"{_fmt(burst.get('seconds'), ' s')}; {_fmt(fast['queued'])} / "
         f"{_fmt(fast['checkpoint'])} / {_fmt(fast['upload'])} s", "recorded"),
        (f"physical restore of {_fmt(size)} memories into a new cortex: Cluster restored; "
         "verification Job (events/s); Ready",
         f"{_fmt(restore.get('cluster_restored_s'), ' s')}; "
         f"{_fmt(restore.get('verification_job_s'), ' s')} "
         f"({_fmt(restore.get('verified_events_per_s'))} events/s); "
         f"{_fmt(restore.get('ready_s'), ' s')}", "recorded"),
        ("physical: bucket bytes after two base backups and the WAL",
         _fmt(p.get("bucket_bytes")), "recorded"),
    ]


def backup_rows(d: dict[str, Any]) -> list[Row]:
    count = _get(d, "memories")
    return [*physical_rows(d.get("physical") or {}),
        (f"export (logical bundle, {_fmt(count)} memories with links and "
         f"{_fmt(_get(d, 'transcripts'))} transcripts)",
         _fmt(_get(d, "export", "memories_per_s"), " memories/s"), ">= 5000 memories/s"),
        ("import with full verification",
         _fmt(_get(d, "import", "memories_per_s"), " memories/s"), ">= 2000 memories/s"),
        ("bundle size / database size", _fmt(_get(d, "size", "bundle_to_database")), ""),
        ("bundle chain verification (hashes / with signatures)",
         f"{_fmt(_get(d, 'verification', 'chain_only', 'events_per_s'))} / "
         f"{_fmt(_get(d, 'verification', 'with_signatures', 'events_per_s'))} events/s",
         ">= 20000 events/s"),
        ("bundle chain verification's CPU bound: CPU per event with signatures (of which one "
         "Ed25519 verify); events/s 2 idle cores allow; the run's rate and load",
         f"{_fmt(_get(d, 'verification_bound', 'with_signatures', 'cpu_us_per_event'))} us "
         f"({_fmt(_get(d, 'verification_bound', 'ed25519_verify_cpu_us'))} us); "
         f"{_fmt(_get(d, 'verification_bound', 'cpu_bound_events_per_s_on_2_idle_cores'))}"
         f" events/s; {_fmt(_get(d, 'verification_bound', 'with_signatures', 'events_per_s'))}"
         f" events/s at load {_fmt(_get(d, 'verification_bound', 'load_average'))}",
         "recorded"),
        ("export -> import round trip, a fixed query set asked of both: answers byte for "
         "byte the same; recall answers equal but for the score's recency term (now() at "
         "the query); differing",
         f"{_fmt(_get(d, 'round_trip_answers', 'byte_identical'))} of "
         f"{_fmt(_get(d, 'round_trip_answers', 'queries'))}; "
         f"{len(_get(d, 'round_trip_answers', 'identical_but_the_clock') or [])}; "
         f"{len(_get(d, 'round_trip_answers', 'differ') or [])}", "all; -; 0"),
        ("load average (1, 5, 15 min) when the import ran",
         ", ".join(_fmt(x) for x in _get(d, "load_average_at_import") or []), "recorded"),
    ]


def writes_rows(d: dict[str, Any]) -> list[Row]:
    seq, batch = d.get("sequential_fulltext") or {}, d.get("batch") or {}
    return [
        ("sequential stores (HTTP, --embedder none, client on the same 2 cores): stores/s; "
         "p50 / p95; load average (1 min)",
         f"{_fmt(seq.get('per_second'), ' /s')}; {_fmt(_get(seq, 'latency_ms', 'p50'))} / "
         f"{_fmt(_get(seq, 'latency_ms', 'p95'), ' ms')}; "
         f"{_load(seq)}", ">= 500 /s"),
        ("sequential stores: the server process's CPU per store (far less load-sensitive "
         "than the rate), each run",
         ", ".join(f"{v} us" for v in seq.get("runs_server_cpu_us_per_store") or ()) or "n/a",
         "recorded"),
        (f"POST /v1/memories:batch ({_fmt(batch.get('per_request'))} per request) at "
         f"{_fmt(batch.get('existing'))} existing: memories/s; request p95; chain verified; "
         "load average (1 min)",
         f"{_fmt(batch.get('per_second'), ' memories/s')}; "
         f"{_fmt(_get(batch, 'request_ms', 'p95'), ' ms')}; {batch.get('chain_ok')}; "
         f"{_load(batch)}", ">= 5000 memories/s"),
        ("POST /v1/memories:batch: the server process's CPU per memory",
         f"{_fmt(batch.get('server_cpu_us_per_memory'), ' us')}", "recorded"),
    ]


def audit_rows(d: dict[str, Any]) -> list[Row]:
    seq, ver = d.get("sequential_stores") or {}, d.get("verification") or {}
    keyed, unkeyed = seq.get("keyed") or {}, seq.get("unkeyed") or {}
    return [
        ("sequential stores (HTTP, one-statement store) with the master key (HMAC-keyed "
         "chain) vs without, interleaved runs: stores/s; p95; ratio; load average (1 min)",
         f"{_fmt(keyed.get('per_second'), ' /s')} vs {_fmt(unkeyed.get('per_second'), ' /s')}"
         f"; {_fmt(_get(keyed, 'latency_ms', 'p95'))} vs "
         f"{_fmt(_get(unkeyed, 'latency_ms', 'p95'), ' ms')}; "
         f"{_fmt(seq.get('keyed_over_unkeyed'))}; {_load(keyed)} / {_load(unkeyed)}",
         "recorded"),
        *[(f"{label} store at the store layer, sealed vs unsealed, alternating: p50 / p95;"
           " median added; load average (1 min)",
           f"{_fmt(_get(d, 'paired_stores', kind, 'keyed', 'p50'))} / "
           f"{_fmt(_get(d, 'paired_stores', kind, 'keyed', 'p95'), ' ms')} vs "
           f"{_fmt(_get(d, 'paired_stores', kind, 'unkeyed', 'p50'))} / "
           f"{_fmt(_get(d, 'paired_stores', kind, 'unkeyed', 'p95'), ' ms')}; "
           f"+{_fmt(_get(d, 'paired_stores', kind, 'median_added_ms'), ' ms')}; "
           f"{_load(d.get('paired_stores') or {})}", "recorded")
          for kind, label in (("one_statement", "one-statement"),
                              ("transactional", "transactional (row + record)"))],
        (f"chain verification of {_fmt(_get(ver, 'hash_and_mac_chain', 'events'))} events: "
         "hashes + MACs / hashes only / deep audit with the key (events/s)",
         f"{_fmt(_get(ver, 'hash_and_mac_chain', 'events_per_second'))} / "
         f"{_fmt(_get(ver, 'hash_chain', 'events_per_second'))} / "
         f"{_fmt(_get(ver, 'deep_with_key', 'events_per_second'))}; load "
         f"{_load(ver.get('hash_and_mac_chain') or {})}", ">= 20000 /s with the key"),
    ]


def audit_tree_rows(d: dict[str, Any]) -> list[Row]:
    reads, cuts, proofs = (d.get("read_records_recall_10k") or {},
                           d.get("checkpoint_store_cost") or {}, d.get("proofs") or {})
    return [
        ("recall at 10k (full text), read records on vs off, paired and alternated: "
         "p50 / p95; p95 added; load average (1 min)",
         f"{_fmt(_get(reads, 'reads_recorded', 'p50'))} / "
         f"{_fmt(_get(reads, 'reads_recorded', 'p95'), ' ms')} vs "
         f"{_fmt(_get(reads, 'reads_not_recorded', 'p50'))} / "
         f"{_fmt(_get(reads, 'reads_not_recorded', 'p95'), ' ms')}; "
         f"{_fmt(reads.get('p95_delta_ms'), ' ms')}; {_load(reads)}", "<= +1 ms at p95"),
        (f"stores by {_fmt(cuts.get('clients'))} clients with a checkpoint every "
         f"{_fmt(cuts.get('every_events'))} events vs none, alternating rounds (best): "
         "stores/s; ratio (of the medians); load average (1 min)",
         f"{_fmt(cuts.get('stores_per_s_with_checkpoints'), ' /s')} vs "
         f"{_fmt(cuts.get('stores_per_s_without'), ' /s')}; {_fmt(cuts.get('ratio'))} "
         f"({_fmt(cuts.get('median_ratio'))}); {_load(cuts)}", "ratio >= 0.95"),
        (f"inclusion proof at {_fmt(proofs.get('events'))} events (chain grown by SQL in "
         f"{_fmt(proofs.get('grown_by_sql_s'), ' s')}, tree built in "
         f"{_fmt(proofs.get('tree_built_s'), ' s')}): in process p50 / p95; over HTTP "
         "p50 / p95; load average (1 min)",
         f"{_fmt(_get(proofs, 'in_process', 'p50'))} / "
         f"{_fmt(_get(proofs, 'in_process', 'p95'), ' ms')}; "
         f"{_fmt(_get(proofs, 'http', 'p50'))} / {_fmt(_get(proofs, 'http', 'p95'), ' ms')};"
         f" {_load(proofs)}", "<= 5 ms at p95"),
        ("a witness's check of a checkpoint (log signature + consistency proof of "
         f"{_fmt(_get(proofs, 'witness', 'proof_hashes'))} hashes), in process",
         f"{_fmt(_get(proofs, 'witness', 'checkpoints_verified_per_s'), ' /s')} "
         f"({_fmt(_get(proofs, 'witness', 'us_each'), ' us')} each)", "recorded"),
    ]


def spoke_memory_rows(d: dict[str, Any]) -> list[Row]:
    review = d.get("capture_review") or {}
    return [
        (f"memory.records.get over POST /v1/spoke/memory vs GET /v1/memories/{{id}} at "
         f"{_fmt(d.get('size'))} records (paired): p95",
         f"{_fmt(_get(d, 'spoke_get', 'p95'), ' ms')} vs "
         f"{_fmt(_get(d, 'native_get', 'p95'), ' ms')} "
         f"({_fmt(d.get('dispatch_overhead_p95_ms'), ' ms')}; load average "
         f"{_fmt(_get(d, 'machine', 'load_average_at_write', 0))})", "within 2 ms"),
        (f"memory.records.list (20 a page, total_authorized counted) by the authority / by a "
         f"reader of one context of eight vs GET /v1/memories?limit=20 at "
         f"{_fmt(d.get('size'))} records (paired): p95",
         f"{_fmt(_get(d, 'spoke_list', 'p95'), ' ms')} / "
         f"{_fmt(_get(d, 'spoke_list_grant', 'p95'), ' ms')} vs "
         f"{_fmt(_get(d, 'native_list', 'p95'), ' ms')}", "recorded"),
        (f"memory.recall by the authority / by a reader of one context of eight vs POST "
         f"/v1/recall at {_fmt(d.get('size'))} records (paired, full text): p95",
         f"{_fmt(_get(d, 'spoke_recall', 'p95'), ' ms')} / "
         f"{_fmt(_get(d, 'spoke_recall_grant', 'p95'), ' ms')} vs "
         f"{_fmt(_get(d, 'native_recall', 'p95'), ' ms')}", "recorded"),
        ("idempotent replay of memory.records.create (same key and request): p95",
         _fmt(_get(d, "replay", "p95"), " ms"), "recorded"),
        ("memory.capture then memory.candidates.review (promote), in sequence",
         _fmt(review.get("capture_review_per_second"), " /s"), "recorded"),
    ]


def peer_rows(d: dict[str, Any]) -> list[Row]:
    """ai-memory beside this server on one corpus (bench/peer.py): p95 and R@5 per side."""
    if "rare_word" not in d and "short_shape" not in d:
        return [("ai-memory side by side", str(d.get("skipped", "not measured")), "")]

    size = _fmt(d.get("memories"))
    rows: list[Row] = []
    if "rare_word" in d:
        rows += [
            (f"rare-word queries (a target's three rarest words) at {size}, p95: ours hybrid "
             f"/ ours full-text / {d.get('peer')}; load {_load(d['rare_word'])}",
             sides_of(d, "rare_word"), "ours hybrid <= the peer (issue 25)"),
            (f"common-word queries (Zipf, 1-3 words) at {size}, p95: same three; load "
             f"{_load(d['common_word'])}", sides_of(d, "common_word"), "recorded")]
    if "short_shape" in d:
        rows.append((
            f"short memories (22 words: 18 common + 4 rare) at "
            f"{_fmt(d['short_shape'].get('memories'))}, a target's three rarest words, p95: "
            f"same three; load {_load(d['short_shape']['rare_word'])}",
            sides_of(d["short_shape"], "rare_word"), "ours hybrid <= the peer (issue 39)"))
    return rows


def sides_of(d: dict[str, Any], q: str) -> str:
    """p95 (and R@5) of ours hybrid / ours full text / the peer in run ``d[q]``."""
    part = d[q]
    return " / ".join(
        f"{_fmt(_get(part, side, 'latency_ms', 'p95'), ' ms')}"
        + (f" (R@5 {_fmt(_get(part, side, 'r@5'))})" if _get(part, side, "r@5") is not None
           else "")
        for side in ("ours_hybrid", "ours_fulltext", "peer"))


def longmemeval_rows(d: dict[str, Any]) -> list[Row]:
    """LongMemEval oracle-pooled (bench/longmemeval.py): each side's scores and latency."""
    results = d.get("results", {})
    rows: list[Row] = []
    for side in ("ours_hybrid", "ours_static", "ours_fulltext", "peer"):
        r = results.get(side)
        if r is None:
            continue
        types = ", ".join(f"{t} {_fmt(x['r@5'])}" for t, x in r["by_type"].items())
        rows.append((
            f"{side}: R@5 / R@10 / recall_all@10 / MRR@10, p50 / p95 ({d.get('memories')} "
            f"sessions, {d.get('questions')} questions; load {_load(results)}); R@5 by type: "
            f"{types}",
            f"{_fmt(r['r@5'])} / {_fmt(r['r@10'])} / {_fmt(r['recall_all@10'])} / "
            f"{_fmt(r['mrr@10'])}, {_fmt(_get(r, 'latency_ms', 'p50'), ' ms')} / "
            f"{_fmt(_get(r, 'latency_ms', 'p95'), ' ms')}",
            "hybrid R@5 >= 0.85, R@10 >= 0.92, each type >= the peer (issue 39)"
            if side == "ours_hybrid" else "recorded"))
    return rows or [("LongMemEval oracle-pooled", "not measured", "")]


def _load(run: dict[str, Any]) -> str:
    load = _get(run, "load_average", 0)
    return "n/a" if load is None else f"{load:.1f}"


def tiers_rows(d: dict[str, Any]) -> list[Row]:
    """``make test-fast`` (bench/tiers.py): wall time beside the CPU it used and the load."""
    fast = d.get("fast") or {}
    return [("make test-fast: wall (CPU user+sys; load average before)",
             f"{_fmt(fast.get('wall_seconds'), ' s')} ({_fmt(fast.get('cpu_seconds'), ' s')}; "
             f"{_fmt(fast.get('load_average_before'))}), {_fmt(fast.get('passed'))} passed",
             "< 60 s on the 2-core machine")]


def subscriptions_rows(d: dict[str, Any]) -> list[Row]:
    t = d.get("throughput") or {}
    lat, up = d.get("delivery_latency") or {}, d.get("catch_up") or {}
    out = d.get("outage") or {}
    fan = d.get("fanout") or {}
    big = fan.get("100") or {}

    def cpu(count: str) -> str:
        return (f"{_fmt(_get(t, count, 'server_cpu_ms_per_store'))}+"
                f"{_fmt(_get(t, count, 'delivery_process_cpu_ms_per_store'))}+"
                f"{_fmt(_get(t, count, 'receiver_cpu_ms_per_store'))}")

    def after(count: str) -> str:
        return _fmt(_get(t, count, 'all_delivered_after_last_store_s'))

    old = d.get("throughput_in_process") or {}
    in_loop: list[Row] = [(
        "the same, delivering from the server's own event loop (`subscriptions.delivery: "
        "in_process`, as before ADR 0142), runs interleaved with the rows above in the same "
        "run: stores/s at 0 / 1 / 10; cost at 1 and 10; server CPU ms per store at 10",
        f"{_fmt(_get(old, '0', 'per_second'))} / {_fmt(_get(old, '1', 'per_second'))} / "
        f"{_fmt(_get(old, '10', 'per_second'), ' /s')}; {_fmt(d.get('cost_at_1_in_process'))}"
        f", {_fmt(d.get('cost_at_10_in_process'))}; "
        f"{_fmt(_get(old, '10', 'server_cpu_ms_per_store'), ' ms')}; "
        f"{_load(old.get('10') or {})}", "recorded")] if old else []
    return [
        ("sequential stores (HTTP, --embedder none) with 0 / 1 / 10 webhook subscriptions "
         "delivering (from the server's delivery process, ADR 0142) to a loopback receiver "
         "process (niced: it stands for another machine) on the same 2 cores: stores/s "
         "(median of 3 interleaved runs); cost at 1 and 10; server+delivery process+receiver "
         "CPU ms per store at 0 / 1 / 10; last event delivered after the last store at "
         "1 / 10; load average (1 min)",
         f"{_fmt(_get(t, '0', 'per_second'))} / {_fmt(_get(t, '1', 'per_second'))} / "
         f"{_fmt(_get(t, '10', 'per_second'), ' /s')}; {_fmt(d.get('cost_at_1'))}, "
         f"{_fmt(d.get('cost_at_10'))}; {cpu('0')} / {cpu('1')} / {cpu('10')} ms; "
         f"{after('1')} / {after('10')} s; {_load(t.get('10') or {})}", "<= 10 % at 10"),
        *in_loop,
        ("delivery latency, store request start -> receipt (an upper bound of commit -> "
         "receipt), 50 stores/s, 1 subscription: p50 / p95",
         f"{_fmt(_get(lat, 'latency_ms', 'p50'))} / {_fmt(_get(lat, 'latency_ms', 'p95'), ' ms')}"
         f"; {_load(lat)}", "p95 <= 50 ms"),
        ("catch-up after an outage: events delivered per second once the subscription is "
         "enabled again",
         f"{_fmt(up.get('events_per_second'), ' /s')} ({_fmt(up.get('backlog'))} events); "
         f"{_load(up)}", "recorded"),
        ("a receiver down (503) for the outage's seconds while memories are stored and "
         "updated at 5/s, default retry schedule (1, 5, 25 s, then x5): events; delivered, "
         "duplicates, out of order, dead letters; refused attempts; caught up after the "
         "receiver's return",
         f"{_fmt(out.get('down_seconds'), ' s')}: {_fmt(out.get('events'))} events; "
         f"{_fmt(out.get('delivered'))}, {_fmt(out.get('duplicates'))}, "
         f"{_fmt(out.get('out_of_order'))}, {_fmt(out.get('dead_letters'))}; "
         f"{_fmt(out.get('refused_attempts'))}; "
         f"{_fmt(out.get('caught_up_after_return_s'), ' s')}; {_load(out)}",
         "every event once, in order"),
        ("fan-out: events written in batches of 100 with 0 / 100 subscriptions (writes/s, "
         "cost), then every event to every subscription: deliveries/s, duplicates, "
         "out of order, server CPU ms per delivery",
         f"{_fmt(_get(fan, '0', 'writes_per_second'))} / "
         f"{_fmt(big.get('writes_per_second'), ' /s')}, {_fmt(fan.get('write_cost'))}; "
         f"{_fmt(big.get('deliveries_per_second'), ' /s')} ({_fmt(big.get('events'))} "
         f"events x {_fmt(big.get('subscriptions'))}), {_fmt(big.get('duplicates'))}, "
         f"{_fmt(big.get('out_of_order'))}, {_fmt(big.get('server_cpu_ms_per_delivery'))} ms;"
         f" {_load(big)}", "once each, in order"),
    ]


def federation_rows(d: dict[str, Any]) -> list[Row]:
    """bench/federation.py: ACK latency per mesh size, the partition's outcome."""
    rows: list[Row] = []
    for size, run in sorted((d.get("latency") or {}).items(), key=lambda x: int(x[0])):
        rows.append((
            f"ACK latency, {size} cortexes in a full mesh (mTLS, signed stores, "
            f"{run.get('rate_per_s')}/s round-robin): origin write -> receiver commit "
            "(the ACK leaves with it), p50 / p95; load average",
            f"{_fmt(_get(run, 'ack_latency_ms', 'p50'))} / "
            f"{_fmt(_get(run, 'ack_latency_ms', 'p95'), ' ms')} "
            f"({_fmt(run.get('receiver_commits'))} commits); {_load(run)}",
            f"p95 <= {run.get('target_p95_ms')} ms"))
    part = d.get("partition") or {}
    if part:
        rows.append((
            f"3 cortexes, c cut off {part.get('partition_s')} s while all write, healed: "
            "converged after (s); lost or duplicated; catch-up at c from a / b (objects/s)",
            f"{_fmt(part.get('converged_after_heal_s'), ' s')}; "
            f"{_fmt(part.get('lost_or_duplicated'))} of {_fmt(part.get('changes_made'))}; "
            f"{_fmt(_get(part, 'catch_up_at_c', 'a', 'per_second'))} / "
            f"{_fmt(_get(part, 'catch_up_at_c', 'b', 'per_second'), ' /s')}; {_load(part)}",
            "0 lost or duplicated"))
    return rows


BUILDERS: dict[str, Callable[[dict[str, Any]], list[Row]]] = {
    "recall": recall_rows, "embedders": embedders_rows, "quality": quality_rows,
    "policy": policy_rows, "kg": kg_rows,
    "attest": attest_rows, "hooks": hooks_rows, "recovery": recovery_rows,
    "operator": operator_rows, "transcripts": transcripts_rows, "mcp": mcp_rows,
    "backup": backup_rows, "ha": ha_rows, "writes": writes_rows,
    "encryption": encryption_rows, "audit": audit_rows, "spoke_memory": spoke_memory_rows,
    "peer": peer_rows, "longmemeval": longmemeval_rows, "audit_tree": audit_tree_rows,
    "tiers": tiers_rows, "subscriptions": subscriptions_rows,
    "federation": federation_rows,
}


def ha_lines() -> list[str]:
    """What bounds a failover's write gap, from docs/benchmarks/ha.json (bench/ha.py)."""
    path = RESULTS / "ha.json"
    if not path.exists():
        return []
    d = json.loads(path.read_text())
    rounds = _get(d, "failover", "rounds") or []
    lines = ["", "## High availability (CloudNativePG, `python -m bench ha`)", "",
             f"A 3-instance cluster with one synchronous replica (CloudNativePG "
             f"{d.get('cnpg_version')}, built here), on the real node; a writer stores "
             f"{_get(d, 'failover', 'write_rate_per_s')} memories/s through the cortex's Service, "
             "one at a time, and retries each write with its Idempotency-Key (after the "
             "answer's Retry-After) until acknowledged, while the primary pod is deleted. Per "
             "failover: the longest stretch without an acknowledgement from the deletion on, "
             "and when CloudNativePG named the new primary (its Cluster's currentPrimary) and "
             "when the read-write Service's endpoint reached it (an upper bound: polled after "
             "the status). The rest of the gap is the surviving replica following the new "
             "primary (commits wait for its confirmation: ADR 0090) and the server's pool "
             "reconnecting; a write sent meanwhile waits for the new primary in the server "
             "(ADR 0126). The slowest write acknowledged at its first attempt (one that "
             "waited in the server for the new primary; a hang past the write deadline, 10 s, "
             f"would show here): {_get(d, 'failover', 'slowest_unretried_write_s')} s; the "
             f"answers the writer got: {_get(d, 'failover', 'answers')}.", "",
             "| failover | gap (s) | CNPG moved the primary after (s) | -rw endpoint moved "
             "after (s) | beyond the promotion (s) | old -> new primary |",
             "|---|---|---|---|---|---|"]
    lines.extend(f"| {r['round']} | {r['gap_s']} | {r['primary_moved_after_s']} | "
                 f"{r.get('endpoint_moved_after_s', '-')} | "
                 f"{r.get('beyond_promotion_s', '-')} | "
                 f"{r['old_primary']} -> {r['new_primary']} |" for r in rounds)
    single, ha = d.get("single", {}), d.get("ha", {})
    lines.extend(["", f"Same run, {d.get('size')} memories in each cortex: sequential stores "
                  f"{_fmt(ha.get('stores_per_second'))} /s on the synchronous cluster vs "
                  f"{_fmt(single.get('stores_per_second'))} /s on the managed pod (store p50 "
                  f"{_fmt(_get(ha, 'store_ms', 'p50'))} vs "
                  f"{_fmt(_get(single, 'store_ms', 'p50'))} ms); recall p95 "
                  f"{_fmt(_get(ha, 'recall_ms', 'p95'))} vs "
                  f"{_fmt(_get(single, 'recall_ms', 'p95'))} ms. Two costs are mixed in the "
                  "stores: every commit waits for the synchronous replica's confirmation, and "
                  "all three instances (two replaying WAL) share the machine's 2 cores with the "
                  "server and the client. Recall never touches a replica (reads stay on the "
                  "primary, ADR 0031), so its difference is the second cost alone. On separate "
                  "nodes only the confirmation's round trip would remain."])
    return lines


def physical_lines() -> list[str]:
    """Where a physical backup's time goes, from docs/benchmarks/backup.json's ``physical``
    (bench/backup_physical.py)."""
    path = RESULTS / "backup.json"
    physical = json.loads(path.read_text()).get("physical") if path.exists() else None
    if not physical:
        return []
    first, second = (physical.get("backup") or {},
                     physical.get("backup_immediate_checkpoint") or {})
    runs = [(f"first, {checkpoint_kind(first)} checkpoint", first),
            (f"second, {checkpoint_kind(second)} checkpoint", second)]
    lines = ["", "## Physical backup (CloudNativePG, `python -m bench.backup_physical`)", "",
             f"One instance with {physical.get('size_memories')} memories (written through "
             "`POST /v1/memories:batch`), an on-demand Backup to MinIO on the real node, "
             "then the same again with an immediate checkpoint (the operator's setting since "
             "this measurement, ADR 0038); load average "
             f"{physical.get('load_average_before')} before, "
             f"{physical.get('load_average_after')} after. Phases from the instance's own "
             "log lines (seconds after the Backup was created): queued until "
             "barman-cloud-backup starts (CloudNativePG runs one backup at a time, and the "
             "ScheduledBackup's first backup was still running), the checkpoint the backup "
             "asked for (PostgreSQL spreads it over 0.9 x checkpoint_timeout = 270 s unless "
             "it is immediate, and waits for a timed checkpoint already running first), then "
             "the upload of the base files and the WAL up to the backup's end.", "",
             "| backup | created -> completed (s) | queued | checkpoint | upload + end WAL |",
             "|---|---|---|---|---|"]
    for label, run in runs:
        phases = backup_phases(run)
        lines.append(f"| {label} | {_fmt(run.get('seconds'))} | {_fmt(phases['queued'])} | "
                     f"{_fmt(phases['checkpoint'])} | {_fmt(phases['upload'])} |")
    burst = runs[1][1]
    segments = sum("Archived WAL file" in line for line in burst.get("timeline") or [])
    restore = physical.get("restore") or {}
    lines.extend([
        "", "The spread checkpoint is the part that does not shrink with the data: 270 s per "
        "checkpoint at any size (the 165 s of the earlier 2,000-memory run had no timeline; "
        "nothing else in a backup of that size takes minutes). With the immediate checkpoint "
        "what is left is barman-cloud's: the base files' upload (gzip, one process, sharing "
        f"the 2 cores with the archiver), and the WAL up to the backup's end: {segments} "
        "segments of 16 MB were archived during that backup, one barman-cloud-wal-archive "
        "process per segment (8-10 s each at this load). The restore: the Cluster restored "
        f"(barman-cloud-restore and WAL replay) in {_fmt(restore.get('cluster_restored_s'))} "
        f"s, the verification Job over {_get(restore, 'report', 'events')} events in "
        f"{_fmt(restore.get('verification_job_s'))} s with its pod's start, Ready "
        f"{_fmt(restore.get('ready_s'))} s after the cortex was created."])
    return lines


def _module_constants(path: Path) -> types.SimpleNamespace:
    """The module's top-level ``NAME = <literal>`` assignments, without importing it."""
    constants = {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)):
            with contextlib.suppress(ValueError):
                constants[node.targets[0].id] = ast.literal_eval(node.value)
    return types.SimpleNamespace(**constants)


def fuzz_lines() -> list[str]:
    """The fuzzing budget of ``make test``, read from the suites' own constants (from the
    file's text: the benchmarks never import tests, ADR 0117)."""
    test_fuzz = _module_constants(ROOT / "tests" / "server" / "test_fuzz.py")
    per_property = test_fuzz.EXAMPLES
    return [
        "",
        "## Fuzzing in `make test`",
        "",
        "Bounded so the suite stays fast; each run draws new examples (a failure prints the",
        "seed to replay it). No case may answer 5xx; every error is in the envelope.",
        "",
        "| suite | what | examples per run |",
        "|---|---|---|",
        f"| tests/server/test_fuzz.py | stores and updates with hostile JSON fragments (nesting "
        f"to 3000 levels, 4000-6000 digit integers, NaN/Infinity/1e999, lone surrogate escapes) "
        f"| {per_property} + {per_property} |",
        f"| tests/server/test_fuzz.py | link, invalidate, kg/query and timeline with instants at "
        f"both ends of the calendar in offsets -14:00..+14:00 | {per_property} |",
        f"| tests/server/test_fuzz.py | Content-Types (415 for anything but JSON) "
        f"| {per_property} |",
        f"| tests/server/test_fuzz.py | stateful: store/update/delete/link/invalidate/walk in any "
        f"order | {test_fuzz.STATEFUL_RUNS} runs x {test_fuzz.STATEFUL_STEPS} steps |",
        f"| tests/server/test_fuzz.py | transcripts (on): stores of plain text, well-formed, "
        f"truncated and non-UTF-8 zstd frames and hostile fragments; what a 201 stored replays "
        f"whole | {test_fuzz.TRANSCRIPT_EXAMPLES} |",
        f"| tests/server/test_fuzz.py | memory stores citing disjoint, overlapping, negative, "
        f"2^31..2^63 and foreign spans; a refusal stores nothing, a 201 replays each span's "
        f"text | {test_fuzz.TRANSCRIPT_EXAMPLES} |",
        "| tests/server/test_schemathesis.py | every OpenAPI operation, positive and negative "
        "generation, transcripts on | 25 per operation and mode |",
    ]


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
    lines.extend(ha_lines())
    lines.extend(physical_lines())
    lines.extend(fuzz_lines())
    out = ROOT / "docs" / "PERFORMANCE.md"
    out.write_text("\n".join(lines) + "\n")
    return out
