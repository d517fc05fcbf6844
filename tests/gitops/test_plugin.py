"""``kubectl cortex`` (the ``kubectl-cortex`` console script) against the real control plane,
the real operator and a real server: status on one screen, a TokenRequest for an identity,
approvals listed and decided with the HMAC key read from the operator's Secret, the deep audit.

The server runs beside the control plane (kwok runs no program in its pods), on a database of
its own, with the approval key the operator generated for the cortex: what ``--server`` is for
(a port-forward, from outside a cluster).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attested_cortex.server.auth import TokenAuth
from attested_cortex.server.tokens import generate
from tests.operator.conftest import Operated, OperatorProcess, cortex, satellite
from tests.support.cortex import MakeCortex

pytestmark = pytest.mark.kube
PLUGIN = Path(sys.executable).with_name("kubectl-cortex")
HELD = {"source": "t/held", "namespace": "held/**", "agents": ["*"], "operations": ["store"],
        "decision": "ask_user", "reason": "a human looks at held/ first"}


def plugin(operated: Operated, *words: str) -> subprocess.CompletedProcess[str]:
    """``kubectl cortex -n <namespace> words...`` as the cluster's administrator."""
    return subprocess.run(
        [str(PLUGIN), "-n", operated.namespace, *words], capture_output=True, text=True,
        timeout=120, check=False,
        env={**os.environ, "KUBECONFIG": str(operated.kube.kubeconfig)})


async def test_status_token_approvals_and_verify(
        operated: Operated, operator: OperatorProcess, make_cortex: MakeCortex,
        migrated_pg15_dsn: str, tmp_path: Path) -> None:
    operated.kubectl("create", "serviceaccount", "pl-sa")
    operated.apply(cortex("pl"),
                   satellite("AgentIdentity", "pl-agent", "pl",
                             serviceAccountRef={"name": "pl-sa"}),
                   satellite("PermissionRule", "pl-rule", "pl", namespace="team/**",
                             agents=["*"], operations=["store"], decision="Allow"))
    await asyncio.to_thread(operated.kubectl, "wait", "--for=condition=Ready", "mcx/pl",
                            "aid/pl-agent", "prule/pl-rule", "--timeout=120s")

    shown = await asyncio.to_thread(plugin, operated, "status", "pl")
    assert shown.returncode == 0, shown.stderr
    for expected in (f"MemoryCortex {operated.namespace}/pl   Ready: True", "DatabaseReady",
                     "SchemaReady", f"http://pl.{operated.namespace}.svc:8080",
                     "PermissionRules (1)", "pl-rule", "Allow store on team/**",
                     "AgentIdentities (1)", "pl-agent", "HookChains (0)"):
        assert expected in shown.stdout, shown.stdout

    # kwok's nodes serve no logs: the API server's answer shows the plugin asked the kubelet
    # for the server container of this cortex's server pod (the real node serves them).
    logged = await asyncio.to_thread(plugin, operated, "logs", "pl", "--tail", "7")
    assert logged.returncode == 2
    assert f"/containerLogs/{operated.namespace}/pl-server-" in logged.stderr
    assert "/server?tailLines=7" in logged.stderr

    minted = await asyncio.to_thread(plugin, operated, "token", "pl-agent", "--duration", "600")
    assert minted.returncode == 0, minted.stderr
    claims = minted.stdout.strip().split(".")[1]
    claims += "=" * (-len(claims) % 4)
    subject = json.loads(base64.urlsafe_b64decode(claims))["sub"]
    assert subject == f"system:serviceaccount:{operated.namespace}:pl-sa"

    secret = json.loads(operated.kubectl("get", "secret", "pl-approval-hmac", "-o",
                                         "json").stdout)
    (tmp_path / "hmac").write_bytes(base64.b64decode(secret["data"]["hmac"]))
    token, digest = generate()
    (tmp_path / "tokens").write_text(f"{digest} k8s:team/approver\n")
    server = await make_cortex(
        migrated_pg15_dsn, migrated=False, auth=TokenAuth.from_file(tmp_path / "tokens"),
        permissions={"mode": "enforce", "rules": [HELD]},
        approval={"hmac_secret_file": tmp_path / "hmac"})
    held = await server.call("POST", "/v1/memories", {"namespace": "held/x", "content": "yes?"},
                             agent=None, headers={"Authorization": f"Bearer {token}"})
    assert held.status == 202, held.text
    approval = held.body["error"]["details"]["approval_id"]
    http = ("--server", server.base, "--token", token)

    listed = await asyncio.to_thread(plugin, operated, "approvals", "pl", *http)
    assert listed.returncode == 0, listed.stderr
    assert "1 pending" in listed.stdout and approval in listed.stdout
    decided = await asyncio.to_thread(plugin, operated, "approvals", "pl", *http,
                                      "--approve", approval)
    assert decided.returncode == 0, decided.stderr
    assert f"approval {approval}: approved" in decided.stdout

    audited = await asyncio.to_thread(plugin, operated, "verify", "pl", *http)
    assert audited.returncode == 0, audited.stdout + audited.stderr
    assert audited.stdout.startswith(f"audit of {operated.namespace}/pl: OK")
    assert json.loads(audited.stdout.split("\n", 1)[1])["deep"]["ok"] is True

    refused = await asyncio.to_thread(plugin, operated, "verify", "pl", "--server", server.base)
    assert refused.returncode == 2 and "--token" in refused.stderr
