"""The published JSON Schemas (2020-12) of the family: one file per wire model of the seed,
and ``operations.json``, the op table with each op's request and answer schema.

Generated from :mod:`.models`, :mod:`.requests` and :mod:`.operations`; the files live in
``docs/spoke-memory/schemas/`` and ``tests/spoke/test_schemas.py`` fails when they are stale
(regenerate: ``python -m attested_cortex.spoke.schemas docs/spoke-memory/schemas``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

from attested_cortex.spoke.models import MODELS, Wire
from attested_cortex.spoke.operations import MEMORY_OPS

DIALECT: Final = "https://json-schema.org/draft/2020-12/schema"
BASE: Final = "https://attested.dev/schemas/spoke-memory/"


def model_schema(model: type[Wire]) -> dict[str, Any]:
    """One model's full JSON Schema document (the validation schema: the shape the family
    accepts and answers; an answer omits what was never set, e.g. ``Content.cognition``)."""
    schema = model.model_json_schema(mode="validation")
    return {"$schema": DIALECT, "$id": f"{BASE}{model.__name__}.json", **schema}


def operations_schema() -> dict[str, Any]:
    """The op table: per op its flag, mutating, may_pend, request and answer schemas."""
    return {"$schema": DIALECT, "$id": f"{BASE}operations.json", "operations": {
        op.name: {"flag": op.flag, "mutating": op.mutating, "may_pend": op.may_pend,
                  "request": op.request.model_json_schema(mode="validation"),
                  "answer": op.answer.model_json_schema(mode="validation")}
        for op in MEMORY_OPS.values()}}


def documents() -> dict[str, str]:
    """File name -> text of every published document."""
    found = {f"{name}.json": model_schema(model) for name, model in MODELS.items()}
    found["operations.json"] = operations_schema()
    return {name: json.dumps(doc, indent=2, sort_keys=True) + "\n"
            for name, doc in sorted(found.items())}


def write(directory: Path) -> None:
    """Write every document into ``directory`` (created when absent)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in documents().items():
        (directory / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/spoke-memory/schemas"))
