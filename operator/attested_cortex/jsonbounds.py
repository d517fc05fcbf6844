"""Bounds on JSON values that Python parses but nothing downstream can carry, and the one
translation of a pydantic validation failure into the domain's 400. Pure; shared by the HTTP
body reader (:mod:`attested_cortex.server.body`) and the MCP tool calls
(:mod:`attested_cortex.mcp.calling`), so a value refused on one entry point is refused on the
other with the same code.

Refused: nesting deeper than :data:`MAX_JSON_DEPTH`, integers past the parser's 4300-digit
limit, ``NaN``/``Infinity`` and lone UTF-16 surrogates (``"\\ud800"``), which cannot be
encoded as UTF-8 for the database.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from attested_cortex.errors import InvalidInputError

M = TypeVar("M", bound=BaseModel)

#: Deepest nesting of arrays and objects a body may have (the stored metadata is far
#: shallower in practice; past a few hundred levels the encoders on the way out recurse
#: out of stack).
MAX_JSON_DEPTH = 64
#: A ``\\uD800``..``\\uDFFF`` escape: the only way a lone surrogate gets into parsed JSON.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")
#: Integers Python's JSON encoder refuses (more than 4300 decimal digits): a parser other
#: than ``json.loads`` (the MCP SDK's) hands them through.
_INT_LIMIT = 10**4300


def decode_json(raw: bytes) -> Any:
    """Strict UTF-8, then JSON, then the checks no parser makes (pure)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"the body is not valid UTF-8 (byte {exc.start})", code="bad_encoding"
        ) from exc
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            code="bad_json",
        ) from exc
    except RecursionError as exc:
        _too_deep(exc)
    except ValueError as exc:  # an integer past int_max_str_digits, or NaN/Infinity
        raise InvalidInputError(
            "the body holds a number JSON cannot carry here (more than 4300 digits, NaN or "
            "Infinity)", code="bad_json",
        ) from exc
    check_value(value, surrogates=_SURROGATE_ESCAPE.search(text) is not None)
    return value


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep(cause: BaseException | None = None, *, limit: int = MAX_JSON_DEPTH) -> NoReturn:
    raise InvalidInputError(
        f"the body nests arrays or objects deeper than {limit} levels",
        code="too_deep", limit=limit,
    ) from cause


def check_value(value: Any, *, surrogates: bool, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Depth (below ``max_depth``), finite floats (1e999 parses as inf) and, when an escape
    could have made one, lone surrogates in keys and strings. Iterative: the depth is not
    bounded yet."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= max_depth:
                _too_deep(limit=max_depth)
            if surrogates:
                for key in item:
                    _check_text(key)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            if depth >= max_depth:
                _too_deep(limit=max_depth)
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, int) and abs(item) >= _INT_LIMIT:
            raise InvalidInputError("the body holds an integer of more than 4300 digits",
                                    code="bad_json")
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInputError(
                "the body holds NaN, Infinity or a number too large for a float",
                code="bad_json")
        elif surrogates and isinstance(item, str):
            _check_text(item)


def _check_text(text: str) -> None:
    if _SURROGATE.search(text):
        raise InvalidInputError(
            "the body holds a lone UTF-16 surrogate escape (\\ud800-\\udfff) that is not "
            "valid Unicode; send surrogate pairs or the character itself", code="bad_encoding",
        )


def validation_error(exc: ValidationError) -> InvalidInputError:
    """A pydantic error as one 400 naming the first bad field (all are in details)."""
    problems = [
        {"field": ".".join(str(p) for p in err["loc"]) or "body", "message": err["msg"]}
        for err in exc.errors(include_url=False, include_input=False)
    ]
    first = problems[0]
    return InvalidInputError(
        f"{first['field']}: {first['message']}", field=first["field"], problems=problems
    )


def parse(model: type[M], data: Any) -> M:
    """Validate ``data`` as ``model`` (unknown fields and wrong types are rejected)."""
    if not isinstance(data, dict):
        raise InvalidInputError("the body must be a JSON object", field="body")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc) from exc
