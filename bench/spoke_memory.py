"""The spoke-memory family (issue 28): what the dispatch adds over the native route, what
an idempotent replay costs, listing and recall over the family against the native ones, and
capture→review throughput.

One ``cortexctl serve`` (tokens authentication, full-text recall, no rate quota) over
PostgreSQL 17 + AGE holding ``--size`` family records (default 10,000) of one subject in
one space, placed in eight contexts; one agent with ``memory.override`` on the space (its
authority) and a reader whose grant reaches one context of the eight (``records_read`` and
``recall``). Paired and interleaved, one request at a time:

* ``native_get``: ``GET /v1/memories/{id}`` of a record's memory row;
* ``spoke_get``: ``memory.records.get`` of the same record over ``POST /v1/spoke/memory``
  (the grant check, the side row and the wire model included);
* ``replay``: ``memory.records.create`` sent again with a key already answered (the
  receipt read back, nothing written);
* ``native_list``: ``GET /v1/memories?namespace=bench&limit=20`` (newest first, no count);
* ``spoke_list``: ``memory.records.list`` (limit 20) by the authority: the page, the SQL
  count of all ``--size`` records (``total_authorized``) and the cursor's digest;
* ``spoke_list_grant``: the same by the reader (its one context: an eighth of the space);
* ``native_recall``: ``POST /v1/recall`` over the namespace (limit 10);
* ``spoke_recall``: ``memory.recall`` by the authority (the native recall restricted to
  the records its grants reach, then the records' side rows);
* ``spoke_recall_grant``: the same by the reader.

Then ``memory.capture`` of one item followed by ``memory.candidates.review`` (promote), in
sequence: reviewed candidates per second. Goal (issue 28): dispatch p95 within 2 ms of the
native route's. ``python -m bench spoke_memory`` writes docs/benchmarks/spoke_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from hack.support.served import serve

from attested_cortex.server.tokens import generate
from attested_cortex.store.migrating import migrate
from bench.common import age_server, create_database, percentiles, write_result

SCOPES = "memory.override,memory.write,memory.read,memory.forget"
ROUNDS = 600
QUERY = "subject keeping"
REVIEWS = 200


class Client:
    """One agent's calls to a served cortex."""

    def __init__(self, http: aiohttp.ClientSession, base: str, token: str) -> None:
        self.http, self.base = http, base
        self.headers = {"Authorization": f"Bearer {token}"}

    async def op(self, name: str, request: dict[str, Any], key: str | None = None) -> Any:
        body: dict[str, Any] = {"op": name, "request": request}
        if key is not None:
            body["idempotency_key"] = key
        async with self.http.post(self.base + "/v1/spoke/memory", json=body,
                                  headers=self.headers) as response:
            answer = await response.json()
            assert response.status == 200, (name, answer)
            return answer

    async def get(self, path: str) -> Any:
        async with self.http.get(self.base + path, headers=self.headers) as response:
            answer = await response.json()
            assert response.status == 200, answer
            return answer

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        async with self.http.post(self.base + path, json=body,
                                  headers=self.headers) as response:
            answer = await response.json()
            assert response.status == 200, answer
            return answer


async def seed(client: Client, size: int) -> list[str]:
    """``size`` records of subject u1 in space ``bench``, eight writers at a time."""
    space = {"space_id": "bench"}
    await client.op("memory.subjects.ensure", {**space, "subject_id": "u1"})
    made: list[str] = []

    async def write(i: int) -> None:
        receipt = await client.op("memory.records.create", {
            **space, "subject_id": "u1", "placement": {"context_id": f"c{i % 8}"},
            "content": {"text": f"record {i}: the subject said something worth keeping"}})
        made.append(receipt["refs"][0])

    for start in range(0, size, 8):
        await asyncio.gather(*(write(i) for i in range(start, min(size, start + 8))))
    return made


async def timed(call: Any) -> float:
    began = time.perf_counter()
    await call
    return (time.perf_counter() - began) * 1000


async def measure(client: Client, reader: Client, ids: list[str]) -> dict[str, Any]:
    space = {"space_id": "bench"}
    replayed = {**space, "subject_id": "u1", "placement": {"shared": True},
                "content": {"text": "kept once"}}
    await client.op("memory.records.create", replayed, key="bench-replay")
    await client.op("memory.grants.grant", {
        **space, "principal_id": "reader", "context_ids": ["c3"],
        "capabilities": ["records_read", "recall"]})
    listed = {**space, "limit": 20}
    recalled = {**space, "query": QUERY, "limit": 10}
    calls: dict[str, Callable[[str], Awaitable[Any]]] = {
        "native_get": lambda r: client.get(f"/v1/memories/{r}"),
        "spoke_get": lambda r: client.op("memory.records.get", {**space, "record_id": r}),
        "replay": lambda r: client.op("memory.records.create", replayed, key="bench-replay"),
        "native_list": lambda r: client.get("/v1/memories?namespace=bench&limit=20"),
        "spoke_list": lambda r: client.op("memory.records.list", listed),
        "spoke_list_grant": lambda r: reader.op("memory.records.list", listed),
        "native_recall": lambda r: client.post("/v1/recall", {
            "query": QUERY, "namespace": "bench", "limit": 10}),
        "spoke_recall": lambda r: client.op("memory.recall", recalled),
        "spoke_recall_grant": lambda r: reader.op("memory.recall", recalled),
    }
    samples: dict[str, list[float]] = {name: [] for name in calls}
    names = list(calls)
    for n in range(ROUNDS):
        record = ids[(n * 7919) % len(ids)]
        for name in names[n % len(names):] + names[:n % len(names)]:
            samples[name].append(await timed(calls[name](record)))
    figures: dict[str, Any] = {name: percentiles(values[ROUNDS // 10:])
                               for name, values in samples.items()}
    figures["dispatch_overhead_p95_ms"] = round(
        figures["spoke_get"]["p95"] - figures["native_get"]["p95"], 3)
    figures["reader_records"] = (await reader.op("memory.records.list", listed))[
        "total_authorized"]
    return figures


async def reviews(client: Client) -> dict[str, Any]:
    space = {"space_id": "bench"}
    began = time.perf_counter()
    for n in range(REVIEWS):
        captured = await client.op("memory.capture", {
            **space, "subject_id": "u1", "capture_scope": {"context_id": "c0"},
            "items": [{"text": f"captured {n}: prefers tea"}]})
        await client.op("memory.candidates.review", {
            **space, "candidate_id": captured["refs"][0], "decision": "promote"})
    seconds = time.perf_counter() - began
    return {"reviewed": REVIEWS, "seconds": round(seconds, 2),
            "capture_review_per_second": round(REVIEWS / seconds, 1)}


async def run(base: str, tokens: dict[str, str], size: int) -> dict[str, Any]:
    async with aiohttp.ClientSession() as http:
        client = Client(http, base, tokens["bench"])
        began = time.perf_counter()
        ids = await seed(client, size)
        seeded = round(time.perf_counter() - began, 1)
        measured = await measure(client, Client(http, base, tokens["reader"]), ids)
        return {"size": size, "seed_seconds": seeded, **measured,
                "capture_review": await reviews(client)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    args = parser.parse_args()
    with age_server() as server, tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        dsn = create_database(server, "spoke")
        asyncio.run(migrate(dsn))
        tokens, lines = {}, []
        for name, scopes in (("bench", SCOPES), ("reader", "memory.read")):
            tokens[name], digest = generate()
            lines.append(f"{digest} {name} {scopes}\n")
        (directory / "tokens").write_text("".join(lines))
        config = directory / "config.yaml"
        config.write_text(yaml.safe_dump({"auth": "tokens", "quotas": {"enabled": False},
                                          "tokens_file": str(directory / "tokens")}))
        with serve(dsn, directory, "--config", str(config), "--embedder", "none") as served:
            result = asyncio.run(run(served.base, tokens, args.size))
    path = write_result("spoke_memory", {**result, "goal": "dispatch p95 within 2 ms of "
                                         "the native route's (issue 28)"})
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
