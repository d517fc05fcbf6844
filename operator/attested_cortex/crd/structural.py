"""Translate a pydantic model's JSON schema into a structural OpenAPI v3 schema.

The API server accepts only structural schemas: no ``$ref``, a ``type`` on every node,
no ``anyOf`` with types (except int-or-string), no ``additionalProperties`` next to
``properties``, no ``const`` or ``title``. Pydantic emits all of those; this module inlines
references, folds ``Optional`` (``anyOf [X, null]``) into ``X`` (nulls are then pruned by the
server, so null means "unset"), and keeps every ``x-kubernetes-*`` extension the models set.
Pure functions; called by ``kinds`` when it renders the CRDs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

#: Keys pydantic emits that a structural schema must not carry.
DROPPED_KEYS = frozenset({"title", "$defs", "discriminator", "examples", "readOnly", "writeOnly"})


class SchemaTranslationError(ValueError):
    """A model uses a construct with no structural equivalent; change the model."""


def structural_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI schema of ``model`` (JSON names, defaults included)."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return translate(raw, raw.get("$defs", {}))


def translate(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Translate one schema node, resolving references against ``defs``."""
    node = _fold(_resolve(node, defs), defs)
    out: Schema = {}
    for key, value in node.items():
        if key in DROPPED_KEYS:
            continue
        out[key] = _translate_key(key, value, defs=defs)
    if out.get("default", ...) is None:
        del out["default"]
    _check_typed(out)
    return out


def _translate_key(key: str, value: Any, *, defs: dict[str, Schema]) -> Any:
    if key == "properties":
        return {name: translate(prop, defs) for name, prop in value.items()}
    if key == "items":
        return translate(value, defs)
    if key == "additionalProperties":
        return translate(value, defs) if isinstance(value, dict) else None
    if key == "const":
        return [value]
    return value


def _resolve(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Inline a ``$ref``; the referring node's keys (description, default) win."""
    if "$ref" not in node:
        return node
    target = defs[node["$ref"].rsplit("/", 1)[-1]]
    rest = {key: value for key, value in node.items() if key != "$ref"}
    return {**_resolve(target, defs), **rest}


def _fold(node: Schema, defs: dict[str, Schema]) -> Schema:
    """Fold ``anyOf [X, null]`` into ``X``; keep int-or-string; refuse other unions."""
    if "anyOf" not in node or node.get("x-kubernetes-int-or-string"):
        return _rename_const(node)
    branches = [b for b in node["anyOf"] if b.get("type") != "null"]
    if len(branches) != 1:
        raise SchemaTranslationError(f"unsupported union in schema: {node['anyOf']}")
    rest = {key: value for key, value in node.items() if key != "anyOf"}
    return _fold({**_resolve(branches[0], defs), **rest}, defs)


def _rename_const(node: Schema) -> Schema:
    if "const" not in node:
        return node
    rest = {key: value for key, value in node.items() if key != "const"}
    return {**rest, "enum": [node["const"]]}


def _check_typed(node: Schema) -> None:
    """Structural schemas need a type everywhere, except on int-or-string and free-form."""
    if "additionalProperties" in node and node["additionalProperties"] is None:
        del node["additionalProperties"]
    exempt = node.get("x-kubernetes-int-or-string") or node.get(
        "x-kubernetes-preserve-unknown-fields"
    )
    if "type" not in node and not exempt:
        raise SchemaTranslationError(f"schema node without a type: {sorted(node)}")
