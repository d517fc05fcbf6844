"""Reading request bodies into validated command models.

The body is read within the configured size (413 beyond it), decoded as strict UTF-8,
parsed as JSON and validated by the operation's pydantic model; each failure is a 400 that
names the field, and nothing is written before all of this passed.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from attested_cortex.errors import InvalidInputError, TooLargeError

M = TypeVar("M", bound=BaseModel)


async def read_json(request: web.Request, *, max_bytes: int) -> Any:
    """The parsed JSON body."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes)
    try:
        raw = await request.read()  # bounded by the application's client_max_size
    except web.HTTPRequestEntityTooLarge as exc:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes) from exc
    if len(raw) > max_bytes:
        raise TooLargeError(f"the body is larger than {max_bytes} bytes", limit=max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"the body is not valid UTF-8 (byte {exc.start})", code="bad_encoding"
        ) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(
            f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            code="bad_json",
        ) from exc


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
