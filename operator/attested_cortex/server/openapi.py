"""The OpenAPI 3.1 document, generated from the pydantic request and response models.

Each route module lists its :class:`Operation` values in ``operations``; :func:`build`
assembles them, so a route and its documentation live side by side and schemathesis can
check the running server against exactly what is documented.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from attested_cortex import __version__
from attested_cortex.server.schemas import ErrorOut

#: Error statuses every authenticated operation may answer.
COMMON_ERRORS = (400, 401, 403, 413, 429, 503)


@dataclass(frozen=True)
class Param:
    """A path, query or header parameter."""

    name: str
    where: str  # "path" | "query" | "header"
    schema: dict[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Operation:
    """One documented route."""

    method: str
    path: str
    summary: str
    ok_status: int
    response: type[BaseModel] | None
    request: type[BaseModel] | None = None
    params: Sequence[Param] = ()
    errors: Sequence[int] = COMMON_ERRORS
    public: bool = False
    extra_responses: dict[int, str] = field(default_factory=dict)


#: The header every write takes (ADR 0030): the same key and request answer the first answer.
IDEMPOTENCY_KEY = Param(
    "Idempotency-Key", "header",
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"},
    description="Makes the write happen at most once: a request sent again with the same "
    "key and body (after a 503 or a lost answer) gets the first answer, with "
    "`Idempotent-Replayed: true`; the same key with another request is 409 "
    "`idempotency_key_reused`. Keys belong to the calling agent and are kept.")


def params_of(model: type[BaseModel], where: str) -> list[Param]:
    """The parameters of a path or query model (:mod:`attested_cortex.service.queries`),
    so the document and the MCP tools read one definition. An optional value is a parameter
    that may be absent, not one that may be null."""
    schema = model.model_json_schema(mode="validation")
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        description = prop.pop("description", "")
        branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            prop = {**branches[0], **prop}
        if prop.get("default", 0) is None:
            del prop["default"]
        params.append(Param(name, where, prop, required=name in required,
                            description=description))
    return params


def _models(operations: Iterable[Operation]) -> list[type[BaseModel]]:
    seen: dict[str, type[BaseModel]] = {"ErrorOut": ErrorOut}
    for op in operations:
        for model in (op.request, op.response):
            if model is not None:
                seen[model.__name__] = model
    return list(seen.values())


def _operation(op: Operation, ref: dict[str, str]) -> dict[str, Any]:
    error = {"application/json": {"schema": {"$ref": ref["ErrorOut"]}}}
    responses: dict[str, Any] = {}
    ok: dict[str, Any] = {"description": "Success"}
    if op.response is not None:
        ok["content"] = {"application/json": {"schema": {"$ref": ref[op.response.__name__]}}}
    responses[str(op.ok_status)] = ok
    for status in op.errors:
        if op.public and status == 401:
            continue
        responses[str(status)] = {"description": f"Error {status}", "content": error}
    for status, text in op.extra_responses.items():
        responses[str(status)] = {"description": text}
    doc: dict[str, Any] = {
        "summary": op.summary,
        "operationId": f"{op.method.lower()}_{op.path.strip('/').replace('/', '_')}"
        .replace("{", "").replace("}", ""),
        "responses": responses,
    }
    if op.params:
        doc["parameters"] = [
            {"name": p.name, "in": p.where, "required": p.required or p.where == "path",
             "schema": p.schema, "description": p.description}
            for p in op.params
        ]
    if op.request is not None:  # a body declared as anything but JSON
        responses["415"] = {"description": "Error 415", "content": error}
        doc["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": ref[op.request.__name__]}}},
        }
    if not op.public:
        doc["security"] = [{"agentId": []}, {"bearer": []}]
    return doc


def build(operations: Sequence[Operation]) -> dict[str, Any]:
    """The OpenAPI document for ``operations``."""
    models = _models(operations)
    keys, schema = models_json_schema(
        [(m, "validation") for m in models], ref_template="#/components/schemas/{model}"
    )
    ref = {m.__name__: keys[(m, "validation")]["$ref"] for m in models}
    paths: dict[str, dict[str, Any]] = {}
    for op in operations:
        paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, ref)
    return {
        "openapi": "3.1.0",
        "info": {"title": "attested-cortex", "version": __version__},
        "paths": paths,
        "components": {
            "schemas": schema.get("$defs", {}),
            "securitySchemes": {
                "agentId": {"type": "apiKey", "in": "header", "name": "X-Agent-Id"},
                "bearer": {"type": "http", "scheme": "bearer"},
            },
        },
    }
