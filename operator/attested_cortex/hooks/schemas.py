"""JSON Schema (2020-12) of each hook event's payload: the contract with hook authors.

The service layer fires events with payloads of these shapes; ``docs/hooks.md`` embeds the
output of ``python -m attested_cortex.hooks.schemas`` (a test keeps the two identical).
Post- events carry the pre- payload plus the operation's result. Objects stay open
(``additionalProperties: true``) so new fields never break a hook. Pure data.
"""

from __future__ import annotations

import json
from typing import Any, Final

from attested_cortex.hooks.events import EVENTS

Schema = dict[str, Any]

_STR: Final[Schema] = {"type": "string"}
_STRS: Final[Schema] = {"type": "array", "items": _STR}
_TIME: Final[Schema] = {"type": "string", "format": "date-time"}


def _obj(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    return {"type": "object", "required": sorted(required),
            "properties": {**required, **(optional or {})}, "additionalProperties": True}


MEMORY: Final = _obj(
    {"id": _STR, "namespace": _STR, "content": _STR},
    {"title": _STR, "tags": _STRS, "metadata": {"type": "object"}, "created_at": _TIME,
     "updated_at": _TIME, "agent_id": _STR},
)
LINK: Final = _obj(
    {"id": _STR, "src_id": _STR, "dst_id": _STR, "relation": _STR},
    {"valid_from": _TIME, "valid_until": _TIME, "attest_level": _STR, "signed_by": _STR,
     "signature": _STR},
)
Fields = dict[str, Schema]

_RECALL: Final[Fields] = {"query": _STR}
_RECALL_OPT: Final[Fields] = {
    "namespace": _STR, "limit": {"type": "integer"}, "budget_tokens": {"type": "integer"},
    "tags": _STRS,
}
_HIT: Final = _obj({"id": _STR, "namespace": _STR, "content": _STR, "score": {"type": "number"}})
_RESULTS: Final[Fields] = {
    "results": {"type": "array", "items": _HIT}, "truncated": {"type": "boolean"},
}
_KG: Final[Fields] = {
    "start_id": _STR, "depth": {"type": "integer", "minimum": 1, "maximum": 5},
}
_KG_OPT: Final[Fields] = {"relations": _STRS, "valid_at": _TIME}
_PATHS: Final[Fields] = {
    "src_id": _STR, "dst_id": _STR, "max_depth": {"type": "integer", "minimum": 1, "maximum": 7},
}
_GRAPH: Final[Fields] = {"nodes": {"type": "array"}, "edges": {"type": "array"}}
_INDEX: Final[Fields] = {"memory_id": _STR, "namespace": _STR, "reason": _STR}
_TRANSCRIPT: Final[Fields] = {"namespace": _STR, "content": _STR}
_APPROVAL: Final[Fields] = {
    "approval_id": _STR, "operation": _STR, "agent_id": _STR, "reason": _STR,
}

#: Every event's payload schema.
PAYLOAD_SCHEMAS: Final[dict[str, Schema]] = {
    "pre_store": _obj({"namespace": _STR, "content": _STR},
                      {"title": _STR, "tags": _STRS, "metadata": {"type": "object"}}),
    "post_store": MEMORY,
    "pre_update": _obj({"id": _STR, "namespace": _STR, "changes": {"type": "object"}}),
    "post_update": MEMORY,
    "pre_delete": _obj({"id": _STR, "namespace": _STR}),
    "post_delete": _obj({"id": _STR, "namespace": _STR}),
    "pre_link": _obj({"src_id": _STR, "dst_id": _STR, "relation": _STR},
                     {"valid_from": _TIME, "valid_until": _TIME}),
    "post_link": LINK,
    "pre_invalidate": _obj({"link_id": _STR}, {"valid_until": _TIME}),
    "post_invalidate": LINK,
    "pre_recall": _obj(_RECALL, _RECALL_OPT),
    "post_recall": _obj({**_RECALL, **_RESULTS}, _RECALL_OPT),
    "pre_search": _obj(_RECALL, _RECALL_OPT),
    "post_search": _obj({**_RECALL, **_RESULTS}, _RECALL_OPT),
    "pre_kg_query": _obj(_KG, _KG_OPT),
    "post_kg_query": _obj({**_KG, **_GRAPH}, _KG_OPT),
    "pre_kg_paths": _obj(_PATHS),
    "post_kg_paths": _obj({**_PATHS, "paths": {"type": "array"}}),
    "pre_index": _obj(_INDEX),
    "post_index": _obj(_INDEX),
    "pre_transcript": _obj(_TRANSCRIPT, {"memory_id": _STR, "format": _STR}),
    "post_transcript": _obj({**_TRANSCRIPT, "id": _STR}, {"memory_id": _STR}),
    "pre_approval": _obj(_APPROVAL),
    "post_approval": _obj({**_APPROVAL, "decision": _STR, "decided_by": _STR}),
}


def schema_for(event: str) -> Schema:
    """The full JSON Schema document of ``event``'s payload."""
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"{event} payload", **PAYLOAD_SCHEMAS[event]}


def render_markdown() -> str:
    """The event reference embedded in docs/hooks.md."""
    sections = [
        f"### `{event}` ({cls})\n\n```json\n{json.dumps(schema_for(event), indent=2)}\n```\n"
        for event, cls in EVENTS.items()
    ]
    return "\n".join(sections)


if __name__ == "__main__":
    print(render_markdown(), end="")
