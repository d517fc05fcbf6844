"""``cortexctl operator``: run the Kubernetes operator (kopf)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any


def register(subparsers: Any) -> None:
    """Add the ``operator`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "operator", help="run the Kubernetes operator (kopf)",
        description="Watch one namespace (default: POD_NAMESPACE) or all of them.",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument("--namespace", action="append",
                       help="namespace to watch (repeatable; default: $POD_NAMESPACE)")
    scope.add_argument("--all-namespaces", action="store_true", help="watch every namespace")
    parser.add_argument("--health-listen", default="0.0.0.0:8081",
                        help="HOST:PORT for /healthz and /readyz")
    parser.add_argument("--metrics-listen", default="0.0.0.0:8080",
                        help="HOST:PORT for /metrics")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate the scope and run the operator until SIGTERM."""
    from attested_cortex.controller.running import OperatorSettings, run_operator
    from attested_cortex.errors import CortexError
    from attested_cortex.server.logs import setup_logging
    from attested_cortex.server.settings import split_listen

    namespaces = tuple(args.namespace or ([os.environ["POD_NAMESPACE"]]
                                          if os.environ.get("POD_NAMESPACE") else []))
    if not args.all_namespaces and not namespaces:
        print("cortexctl operator: give --namespace NS, --all-namespaces, or set POD_NAMESPACE",
              file=sys.stderr)
        return 2
    try:
        settings = OperatorSettings(
            namespaces=() if args.all_namespaces else namespaces,
            clusterwide=args.all_namespaces,
            health=split_listen(args.health_listen), metrics=split_listen(args.metrics_listen),
        )
    except CortexError as exc:
        print(f"cortexctl operator: {exc.message}", file=sys.stderr)
        return 2
    setup_logging(os.environ.get("ATTESTED_CORTEX_LOG_LEVEL", "INFO"))
    logging.getLogger("kopf").setLevel(logging.INFO)
    asyncio.run(run_operator(settings))
    return 0
