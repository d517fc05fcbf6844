"""JSON answers encoded with orjson: the large ones (a depth-5 kg/query answer names
thousands of ids; a batch answers up to 1,000 memories) cost a fifth of the standard
library's ``json.dumps`` (docs/adr/0044-batch-writes.md has the figures). Called by the
routes whose answers can be large.

orjson writes the same JSON for what the views hold (strings, ints, floats, bools, None,
lists, dicts with string keys), compactly; what it refuses (an integer past 64 bits, which a
memory's metadata may carry) falls back to the standard library, so no answer fails here.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from aiohttp import web


def json_answer(data: Any, *, status: int = 200) -> web.Response:
    """``data`` as a JSON response (``application/json``, UTF-8)."""
    try:
        body = orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError: an integer past 64 bits, say
        body = json.dumps(data).encode()
    return web.Response(body=body, status=status, content_type="application/json")
