"""``kubectl cortex``: the kubectl plugin (console script ``kubectl-cortex``), ADR 0045.

kubectl runs ``kubectl-cortex`` from PATH for ``kubectl cortex ...`` and passes the words on
as they were typed. Six commands, each a read of what the operator and the server already
expose; the plugin decides nothing itself:

* ``status <cortex>``: the MemoryCortex's conditions, endpoint, schema and graph backend,
  and its rules, hook chains and identities with their Ready, on one screen;
* ``verify <cortex>``: the deep audit (``GET /v1/audit/verify?deep=true``) with a token the
  user chooses, the report printed, exit 1 when it fails;
* ``token <identity>``: a ServiceAccount token (TokenRequest) for the AgentIdentity's
  ``serviceAccountRef``, what an agent authenticates with (``--auth kubernetes``);
* ``approvals <cortex>``: pending approvals; ``--approve ID`` / ``--reject ID`` decide one,
  signed with the HMAC key read from the cortex's ``<cortex>-approval-hmac`` Secret;
* ``dead-letters <cortex> <subscription>``: a webhook subscription's dead letters;
  ``--replay SEQ|all`` delivers again, ``--purge`` drops them (issue 41);
* ``logs <cortex>``: the server pods' logs.

Kubernetes is reached with the package's one client (:mod:`attested_cortex.kubeclient`) from
``$KUBECONFIG`` (else ``~/.kube/config``, else the pod's service account); the cortex's HTTP
API with the standard library, at ``--server`` or ``status.endpoint`` (an in-cluster address:
from outside, ``kubectl port-forward svc/<cortex>`` and ``--server http://127.0.0.1:PORT``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from attested_cortex.cli import kubectl_commands as commands
from attested_cortex.kubeclient import (
    ApiError,
    Connection,
    ConnectionConfigError,
    from_kubeconfig,
    in_cluster,
)


def connection() -> tuple[Connection, str]:
    """Where the API server is and the current context's namespace (``default``)."""
    path = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
                or Path.home() / ".kube" / "config")
    if path.is_file():
        return from_kubeconfig(path), commands.context_namespace(path)
    return in_cluster(), "default"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubectl cortex",
                                     description="attested-cortex from kubectl.")
    parser.add_argument("-n", "--namespace", help="namespace (default: the context's)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    status = sub.add_parser("status", help="a MemoryCortex and its satellites on one screen")
    status.add_argument("cortex")
    verify = sub.add_parser("verify", help="the deep audit of a cortex, through its API")
    verify.add_argument("cortex")
    _http_options(verify)
    verify.add_argument("--shallow", action="store_true", help="the chain only, no row sweep")
    token = sub.add_parser("token", help="mint a ServiceAccount token for an AgentIdentity")
    token.add_argument("identity")
    token.add_argument("--duration", type=int, default=3600, help="seconds (default 3600)")
    token.add_argument("--audience", action="append", default=[],
                       help="token audience (repeatable; the server's token_audiences)")
    approvals = sub.add_parser("approvals", help="pending approvals; decide one")
    approvals.add_argument("cortex")
    _http_options(approvals)
    decide = approvals.add_mutually_exclusive_group()
    decide.add_argument("--approve", metavar="ID")
    decide.add_argument("--reject", metavar="ID")
    approvals.add_argument("--remember", action="store_true",
                           help="with --approve: remember the decision as a rule")
    dead = sub.add_parser("dead-letters", help="a webhook subscription's dead letters: "
                          "list, replay, purge")
    dead.add_argument("cortex")
    dead.add_argument("subscription")
    _http_options(dead)
    act = dead.add_mutually_exclusive_group()
    act.add_argument("--replay", metavar="SEQ|all", help="deliver one (or each) again, now")
    act.add_argument("--purge", action="store_true", help="drop every dead letter")
    logs = sub.add_parser("logs", help="the server pods' logs")
    logs.add_argument("cortex")
    logs.add_argument("--tail", type=int, default=100, help="lines per pod (default 100)")
    logs.add_argument("-c", "--container", default="server")
    return parser


def _http_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--server", help="the cortex's URL (default: status.endpoint)")
    parser.add_argument("--token", help="bearer token (or --token-file, or $CORTEX_TOKEN)")
    parser.add_argument("--token-file", type=Path)


def main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-cortex``'s entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        info, namespace = connection()
        return asyncio.run(commands.run(args, info, args.namespace or namespace))
    except (ApiError, ConnectionConfigError, commands.PluginError) as exc:
        print(f"kubectl cortex: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
