"""``cortexctl crds``: print the four CRDs as one YAML stream, or write one file per CRD.

Registered by ``attested_cortex.cli.main``; ``make crds`` runs it to refresh ``crds/`` and
the chart's copy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from attested_cortex.crd.rendering import render_all, write_files


def register(subparsers: Any) -> None:
    """Add the ``crds`` command."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "crds", help="print the CustomResourceDefinitions as YAML"
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write one <group>_<plural>.yaml file per CRD into this directory",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the CRDs, or write them into ``--out-dir`` and list the files written."""
    if args.out_dir is None:
        sys.stdout.write(render_all())
        return 0
    for path in write_files(args.out_dir):
        print(path)
    return 0
