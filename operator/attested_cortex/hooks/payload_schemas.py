"""JSON Schema (2020-12) of each hook event's payload: the contract with hook authors.

Generated from the payload models of :mod:`.payloads`, which the service layer fires;
``docs/hooks.md`` embeds the output of ``python -m attested_cortex.hooks.payload_schemas`` (a test
keeps the two identical, another validates every fired payload against these schemas).
Post- events carry the operation's result. Objects stay open (``additionalProperties:
true``) so new fields never break a hook.
"""

from __future__ import annotations

import json
from typing import Any, Final

from attested_cortex.hooks.events import EVENTS, EventName
from attested_cortex.hooks.payloads import MODELS

Schema = dict[str, Any]


def _generate(event: EventName) -> Schema:
    schema = MODELS[event].model_json_schema(mode="serialization")
    schema.pop("title", None)
    schema.pop("description", None)
    return schema


#: Every event's payload schema.
PAYLOAD_SCHEMAS: Final[dict[EventName, Schema]] = {event: _generate(event) for event in EVENTS}


def schema_for(event: EventName) -> Schema:
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
