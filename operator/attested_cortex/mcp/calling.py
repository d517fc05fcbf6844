"""One tools/call: bound the arguments, validate them, run the tool, shape the answer.

The arguments get exactly the checks an HTTP body gets before its model sees it (depth,
non-finite numbers, 4300-digit integers, lone surrogates: :mod:`attested_cortex.jsonbounds`;
their JSON size against ``limits.max_body_bytes``: 413 ``too_large``), then the tool's
pydantic model (400 naming the field), then the service call. Every failure is answered as
an MCP tool result with ``isError: true`` whose structured content is the HTTP error
envelope (``{"error": {code, message, details}, "status": <HTTP status>}``): the same codes
as the HTTP routes, and never a protocol or transport failure. Called by :mod:`.serving`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from attested_cortex.errors import CortexError, NotFoundError, TooLargeError
from attested_cortex.jsonbounds import check_value, parse
from attested_cortex.mcp.tools import BY_NAME, Answer
from attested_cortex.service.pipeline.context import Caller, Services
from attested_cortex.service.resources import idempotency

log = logging.getLogger(__name__)


def check_arguments(arguments: Mapping[str, Any] | None, *, max_bytes: int) -> dict[str, Any]:
    """The arguments as a plain object, within the bounds of an HTTP body (or the error)."""
    value: dict[str, Any] = dict(arguments or {})
    # Every string is checked: unlike an HTTP body there is no raw text to look for escapes in.
    check_value(value, surrogates=True)
    size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
    if size > max_bytes:
        raise TooLargeError(f"the arguments are {size} bytes as JSON; the limit is {max_bytes}",
                            limit=max_bytes)
    return value


async def call(svc: Services, caller: Caller, name: str,
               arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """Run tool ``name`` for ``caller``; every outcome is a tool result."""
    try:
        tool = BY_NAME.get(name)
        if tool is None:
            raise NotFoundError(f"there is no tool {name!r}; tools/list names them",
                                code="unknown_tool", tool=name[:100])
        args = parse(tool.arguments, check_arguments(arguments,
                                                      max_bytes=svc.limits.max_body_bytes))
        if tool.keyed is None:
            return answer(await tool.run(svc, caller, args))
        keyed = tool.keyed

        async def write(who: Caller) -> Any:
            return await keyed.write(svc, who, args)

        # with the POST's Idempotency-Key header, at most once per key (ADR 0030)
        written = await idempotency.once(
            svc, caller, write, operation=f"mcp {name}", request=args.model_dump(mode="json"),
            answer=keyed.answer, status=200, resource_id=keyed.resource(args))
        return answer(written.answer)
    except CortexError as exc:
        if exc.http_status >= 500 and exc.http_status != 503:
            log.exception("internal error in an MCP tool call", extra={"tool": name[:100]})
        return failure(exc.http_status, exc.code, exc.message, exc.details)
    except Exception:
        log.exception("unhandled error in an MCP tool call", extra={"tool": name[:100]})
        return failure(500, "internal", "internal error; see the server log", {})


def answer(result: Answer) -> types.CallToolResult:
    """A successful tool result: the JSON as text and as structured content."""
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=result)


def failure(status: int, code: str, message: str,
            details: Mapping[str, Any] | None) -> types.CallToolResult:
    """A tool error carrying the HTTP error envelope and its status."""
    body = {"error": {"code": code, "message": message, "details": dict(details or {})},
            "status": status}
    text = json.dumps(body, separators=(",", ":"), ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(text=text)],
                                structured_content=json.loads(text), is_error=True)
