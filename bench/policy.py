"""Recall latency with 200 permission rules and scoped tokens in force, against none.

Goal (issue 12): recall p95 with 200 rules and scopes stays within 1 ms of a server with
none. Two ``cortexctl serve`` processes on one 10k-memory database answer the same recalls,
one pair at a time, alternating which goes first (the paired method of bench/recall.py).
Both use ``--auth tokens``; the policy server runs in enforce mode with 200 rules, a
namespace-qualified read scope (so every hit passes the read-isolation filter) and the rate
quota on (with a limit the bench never reaches).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from hack.support.served import serve

from attested_cortex.server.tokens import generate
from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, write_result
from bench.recall import QUERIES, WARMUP, bulk_load
from bench.textgen import TextGenerator

RULES = 200


def rules() -> list[dict[str, Any]]:
    """200 rules over made-up namespaces, agents and operations (none denies the bench)."""
    ops = ["store", "update", "delete", "link", "recall", "search", "kg_query"]
    return [{"source": f"bench/rule-{i}", "namespace": f"org-{i % 17}/team-{i % 5}/**",
             "agents": [f"agent-{i % 23}", "bench-other-*"], "operations": [ops[i % 7]],
             "decision": ("allow", "deny", "ask_user")[i % 3], "inherit": i % 4 != 0,
             "priority": i % 11, "reason": f"rule {i}"} for i in range(RULES)]


def config(directory: Path, name: str, *, policy: bool) -> tuple[Path, str]:
    """A server config and the bench agent's token."""
    token, digest = generate()
    scopes = " memory.read:**,graph.read" if policy else ""
    (directory / f"{name}.tokens").write_text(f"{digest} bench{scopes}\n")
    settings: dict[str, Any] = {"auth": "tokens",
                                "tokens_file": str(directory / f"{name}.tokens")}
    if policy:
        settings["permissions"] = {"mode": "enforce", "rules": rules()}
        settings["quotas"] = {"requests_per_second": 100_000}
    else:
        settings["quotas"] = {"enabled": False}
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path, token


async def paired(plain: tuple[str, str], ruled: tuple[str, str],
                 gen: TextGenerator) -> dict[str, Any]:
    """Alternating pairs of the same recall against both servers."""
    samples: dict[str, list[float]] = {plain[0]: [], ruled[0]: []}
    results: dict[str, int] = {plain[0]: 0, ruled[0]: 0}
    loop = asyncio.get_running_loop()
    async with aiohttp.ClientSession() as session:
        for i in range(WARMUP + QUERIES):
            body: dict[str, Any] = {"query": gen.query(), "limit": 10}
            if i % 3 == 0:
                body["namespace"] = gen.rng.choice(gen.namespaces)
            for base, token in (plain, ruled) if i % 2 else (ruled, plain):
                started = loop.time()
                async with session.post(f"{base}/v1/recall", json=body,
                                        headers={"Authorization": f"Bearer {token}"}) as r:
                    answer = await r.json()
                    assert r.status == 200, answer
                if i >= WARMUP:
                    samples[base].append((loop.time() - started) * 1000)
                    results[base] += len(answer["results"])
    without, with_rules = percentiles(samples[plain[0]]), percentiles(samples[ruled[0]])
    return {"without_policy": without, "with_200_rules_and_scopes": with_rules,
            "mean_results": {"without": round(results[plain[0]] / QUERIES, 2),
                             "with": round(results[ruled[0]] / QUERIES, 2)},
            "p50_delta_ms": round(with_rules["p50"] - without["p50"], 3),
            "p95_delta_ms": round(with_rules["p95"] - without["p95"], 3)}


def policy_cpu() -> dict[str, Any]:
    """The CPU the policy steps add to one recall, measured in process (insensitive to the
    host's load, unlike the HTTP pairs): the scope check, the rule walk and the
    read-isolation filter over 10 hits in 10 namespaces, with 200 rules, a qualified scope,
    enforce mode, and a fresh rule cache for every agent."""
    from attested_cortex.policy.rules import RuleSet, compile_rules
    from attested_cortex.policy.scopes import ScopeSet
    from attested_cortex.server.settings import RuleSettings
    from attested_cortex.service.pipeline.calls import Target
    from attested_cortex.service.pipeline.context import Caller, Policy, Services
    from attested_cortex.service.pipeline.deciding import check_scope, visible
    from attested_cortex.service.pipeline.deciding import rules as decide
    from attested_cortex.service.pipeline.operations import RECALL
    from attested_cortex.service.resources.commands import RecallQuery
    from attested_cortex.service.resources.recall import RecallCall
    from attested_cortex.types import AgentId

    ruleset = RuleSet(compile_rules([RuleSettings(**r) for r in rules()]))
    svc = Services(db=None, permission_mode="enforce",  # type: ignore[arg-type]
                   policy=Policy(rules=ruleset))
    caller = Caller(AgentId("bench"), "tokens", ScopeSet.parse(["memory.read:**"]))
    call = RecallCall(RecallQuery(query="x"))
    namespaces = [f"org-{i}/team-{i % 5}/notes" for i in range(10)]
    target = Target(("org-1/team-1/notes",))
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(2000):
            check_scope(RECALL, caller, target)
            decide(svc, RECALL, caller, target, call)
            [visible(svc, caller, RECALL, ns) for ns in namespaces]
        samples.append((time.perf_counter() - started) / 2000 * 1e6)
    return {"per_recall_us_best_of_5": round(min(samples), 2),
            "per_recall_us_median_of_5": round(sorted(samples)[2], 2)}


def run() -> dict[str, Any]:
    """Run the policy benchmark and write docs/benchmarks/policy.json."""
    out: dict[str, Any] = {"goals": {"recall_p95_delta_ms": 1.0}, "rules": RULES,
                           "load_average_before": os.getloadavg(),
                           "policy_cpu": policy_cpu()}
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        dsn = create_database(server, "bench_policy")
        asyncio.run(migrate(dsn))
        bulk_load(dsn, TextGenerator(seed=11), 10_000)
        work = Path(tmp)
        plain_config, plain_token = config(work, "plain", policy=False)
        ruled_config, ruled_token = config(work, "ruled", policy=True)
        with serve(dsn, work, "--config", str(plain_config)) as plain, \
                serve(dsn, work, "--config", str(ruled_config)) as ruled:
            out["recall_10k"] = asyncio.run(paired(
                (plain.base, plain_token), (ruled.base, ruled_token), TextGenerator(seed=5)))
    out["load_average_after"] = os.getloadavg()
    write_result("policy", out)
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
