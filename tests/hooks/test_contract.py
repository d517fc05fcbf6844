"""Contracts of the hook package: schemas for every event and documented, transports
independent of each other, hook programs importable without the pipeline."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from attested_cortex.hooks.events import EVENTS
from attested_cortex.hooks.payload_schemas import PAYLOAD_SCHEMAS, render_markdown, schema_for

ROOT = Path(__file__).resolve().parents[2]
TRANSPORTS = ROOT / "operator" / "attested_cortex" / "hooks" / "transports"


def test_every_event_has_a_payload_schema() -> None:
    assert set(PAYLOAD_SCHEMAS) == set(EVENTS)
    for event in EVENTS:
        schema = schema_for(event)
        assert schema["type"] == "object" and set(schema["required"]) <= set(schema["properties"])


def test_docs_embed_the_current_schemas() -> None:
    doc = (ROOT / "docs" / "hooks.md").read_text()
    embedded = doc.split("<!-- schemas:begin -->\n", 1)[1].split("<!-- schemas:end -->", 1)[0]
    assert embedded == render_markdown(), "run: python -m attested_cortex.hooks.payload_schemas"


def test_transports_do_not_import_each_other() -> None:
    names = {path.stem for path in TRANSPORTS.glob("*.py")} - {"__init__"}
    for path in TRANSPORTS.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}
        siblings = {f"attested_cortex.hooks.transports.{name}" for name in names - {path.stem}}
        assert not imported & siblings, path.name


@pytest.mark.spawns
def test_hook_programs_do_not_load_the_pipeline() -> None:
    code = ("import sys, attested_cortex.hooks.reference.redact, "
            "attested_cortex.hooks.reference.autolink, attested_cortex.hooks.reference.rerank, "
            "attested_cortex.hooks.reference.expand; "
            "print(sorted(m for m in ('prometheus_client', 'yaml', "
            "'attested_cortex.hooks.dispatching') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
