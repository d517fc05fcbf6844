"""``kubectl cortex dead-letters`` (issue 41 item 6) as a real subprocess against a real
server with token authentication (``--server``, as through a port-forward; the Kubernetes
API is not asked for anything then): a dead letter listed, replayed once the receiver is
back, and a later one purged. About 8 s (each plugin run starts Python)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

from hack.support.waiting import await_until

from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.subscriptions.receivers import receiving
from tests.subscriptions.test_delivery import FAST
from tests.support.cortex import MakeCortex

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: unused}}]
contexts: [{name: x, context: {cluster: c, user: u, namespace: team}}]
current-context: x
"""


async def test_list_replay_and_purge(make_cortex: MakeCortex, migrated_pg15_dsn: str,
                                     tmp_path: Path) -> None:
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} ops:admin\n")
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    cortex = await make_cortex(migrated_pg15_dsn, migrated=False, subscriptions=FAST,
                               auth=TokenAuth.from_file(tmp_path / "tokens"))
    bearer = {"Authorization": f"Bearer {token}"}

    def plugin(*words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "attested_cortex.cli.kubectl", "dead-letters", "mcx",
             "hook", "--server", cortex.base, "--token", token, *words],
            capture_output=True, text=True, timeout=60, check=False,
            env={**os.environ, "KUBECONFIG": str(tmp_path / "kubeconfig")})

    async with receiving("down") as receiver:
        made = await cortex.call("POST", "/v1/subscriptions", {
            "name": "hook", "url": receiver.url, "events": ["post_store"],
            "allow_private_targets": True}, agent=None, headers=bearer)
        assert made.status == 201, made.text
        receiver.secret = made.body["secret"]
        stored = await cortex.call("POST", "/v1/memories", {"namespace": "t", "content": "x"},
                                   agent=None, headers=bearer)
        assert stored.status == 201, stored.text

        async def listed() -> str:
            shown = await asyncio.to_thread(plugin)
            assert shown.returncode == 0, shown.stderr
            return "1 dead letters" in shown.stdout and shown.stdout

        shown = await await_until(listed, seconds=15, what="the dead letter listed")
        assert "post_store" in shown and "HTTP 503" in shown
        failed = await asyncio.to_thread(plugin, "--replay", "all")
        assert failed.returncode == 1 and "failed 1" in failed.stdout  # still down
        receiver.mode = "ok"
        replayed = await asyncio.to_thread(plugin, "--replay", "all")
        assert replayed.returncode == 0 and "delivered 1, failed 0" in replayed.stdout
        assert len(receiver.accepted) == 1
        receiver.mode = "down"
        await cortex.call("POST", "/v1/memories", {"namespace": "t", "content": "y"},
                          agent=None, headers=bearer)
        await await_until(listed, seconds=15, what="the second dead letter")
        purged = await asyncio.to_thread(plugin, "--purge")
        assert purged.returncode == 0 and "purged 1" in purged.stdout
