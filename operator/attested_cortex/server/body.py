"""Reading request bodies into validated command models.

The body must be declared JSON (``Content-Type: application/json`` or a ``+json`` type, or
no Content-Type at all; anything else is 415), is read within the configured size (413
beyond it), decoded as strict UTF-8, parsed as JSON and validated by the operation's
pydantic model; each failure is a 400 that names the problem, and nothing is written before
all of this passed. JSON that Python parses but nothing downstream can carry is refused
here too: nesting deeper than :data:`MAX_JSON_DEPTH`, integers past the parser's 4300-digit
limit, ``NaN``/``Infinity`` and lone UTF-16 surrogates (``"\\ud800"``), which cannot be
encoded as UTF-8 for the database.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn, TypeVar

from aiohttp import hdrs, web
from pydantic import BaseModel, ValidationError

from attested_cortex.errors import InvalidInputError, TooLargeError, UnsupportedMediaTypeError

M = TypeVar("M", bound=BaseModel)

#: Deepest nesting of arrays and objects a body may have (the stored metadata is far
#: shallower in practice; past a few hundred levels the encoders on the way out recurse
#: out of stack).
MAX_JSON_DEPTH = 64
#: A ``\\uD800``..``\\uDFFF`` escape: the only way a lone surrogate gets into parsed JSON.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


async def read_json(request: web.Request, *, max_bytes: int) -> Any:
    """The parsed JSON body."""
    check_content_type(request.headers.get(hdrs.CONTENT_TYPE))
    if request.content_length is not None and request.content_length > max_bytes:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes)
    try:
        raw = await request.read()  # bounded by the application's client_max_size
    except web.HTTPRequestEntityTooLarge as exc:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes) from exc
    if len(raw) > max_bytes:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes)
    return decode_json(raw)


def check_content_type(header: str | None) -> None:
    """Refuse (415) a body declared as anything but JSON in UTF-8."""
    if header is None:
        return
    mime, _, params = header.partition(";")
    mime = mime.strip().lower()
    charset = next((p.split("=", 1)[1].strip().strip('"').lower() for p in params.split(";")
                    if p.strip().lower().startswith("charset=")), "utf-8")
    if (mime == "application/json" or mime.endswith("+json")) and charset in ("utf-8", "utf8"):
        return
    raise UnsupportedMediaTypeError(
        "send the body as Content-Type: application/json (UTF-8)", content_type=mime[:100]
    )


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
    _check_value(value, surrogates=_SURROGATE_ESCAPE.search(text) is not None)
    return value


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def _too_deep(cause: BaseException | None = None) -> NoReturn:
    raise InvalidInputError(
        f"the body nests arrays or objects deeper than {MAX_JSON_DEPTH} levels",
        code="too_deep", limit=MAX_JSON_DEPTH,
    ) from cause


def _check_value(value: Any, *, surrogates: bool) -> None:
    """Depth, finite floats (1e999 parses as inf) and, when an escape could have made one,
    lone surrogates in keys and strings. Iterative: the depth is not bounded yet."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            if depth >= MAX_JSON_DEPTH:
                _too_deep()
            if surrogates:
                for key in item:
                    _check_text(key)
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            if depth >= MAX_JSON_DEPTH:
                _too_deep()
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, float) and not math.isfinite(item):
            raise InvalidInputError("the body holds a number too large for a float",
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


async def read_model(request: web.Request, model: type[M], *, max_bytes: int) -> M:
    """Read, decode, parse and validate a request body as ``model``."""
    return parse(model, await read_json(request, max_bytes=max_bytes))
