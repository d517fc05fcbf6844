"""Pure builders for the AGE backend's Cypher and label-table SQL; no I/O.

Called by ``age.AgeBackend`` (reads, write mirroring) and ``age_setup`` (bulk load, indexes).

Why literals and not Cypher parameters: AGE plans ``v.id IN ['..', ..]`` with literal lists as
an index scan on the ``memory`` label's id expression index, while a parameter list defeats the
index. Every value spliced in is typed (``uuid.UUID``, ``int``) or a relation name that passed
``store.links.check_relation`` (``[a-z0-9_-]`` only), so nothing user-written reaches the text.

The mirrored graph: vertex label ``memory`` with ``{id}``; edge label ``link`` with ``{id, rel,
vf, vu}`` where ``vf``/``vu`` are epoch microseconds (``vu`` absent while the window is open).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Literal

from attested_cortex.store.links import check_relation

if TYPE_CHECKING:
    from attested_cortex.store.links import Link

GRAPH: Final = "cortex_graph"
VERTEX: Final = f"{GRAPH}.memory"
EDGE: Final = f"{GRAPH}.link"
#: The expression AGE generates for ``v.id``; indexes on it serve Cypher and mirroring alike.
ID_EXPR: Final = (
    "ag_catalog.agtype_access_operator(VARIADIC ARRAY[properties, '\"id\"'::ag_catalog.agtype])"
)
VU_EXPR: Final = ID_EXPR.replace('"id"', '"vu"')
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)

Direction = Literal["out", "in", "both"]


def id_expr(alias: str) -> str:
    """``ID_EXPR`` over the label table aliased ``alias``."""
    return ID_EXPR.replace("properties", f"{alias}.properties")


def micros(instant: datetime) -> int:
    """Exact epoch microseconds of an aware datetime (no float rounding)."""
    return (instant - _EPOCH) // timedelta(microseconds=1)


def id_list(ids: Iterable[uuid.UUID]) -> str:
    """A Cypher list literal of uuid strings: ``['…', '…']``."""
    return "[" + ", ".join(f"'{uuid.UUID(str(i))}'" for i in ids) + "]"


def active(instant_us: int, relations: Sequence[str] | None) -> str:
    """Cypher predicate: edge ``e`` holds at the instant and has an allowed relation."""
    clause = f"e.vf <= {int(instant_us)} AND (e.vu IS NULL OR {int(instant_us)} < e.vu)"
    if relations is not None:
        names = ", ".join(f"'{check_relation(r)}'" for r in relations)
        clause += f" AND e.rel IN [{names}]"
    return clause


def hop_sql(frontier: Iterable[uuid.UUID], *, where: str, direction: Direction) -> str:
    """One fixed hop from ``frontier`` (``a``) to neighbours (``b``) over edges ``e``.

    Rows: (a.id, e.id, b.id, e.rel) as agtype text. ``direction`` picks the arrow.
    """
    arrow = {"out": "-[e:link]->", "in": "<-[e:link]-", "both": "-[e:link]-"}[direction]
    cypher = (
        f"MATCH (a:memory){arrow}(b:memory) WHERE a.id IN {id_list(frontier)} AND {where}"
        " RETURN a.id, e.id, b.id, e.rel"
    )
    return (
        f"SELECT * FROM ag_catalog.cypher('{GRAPH}', $cy${cypher}$cy$)"
        " AS (a ag_catalog.agtype, e ag_catalog.agtype, b ag_catalog.agtype,"
        " r ag_catalog.agtype)"
    )


def parse_hop(row: Sequence[Any]) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID, str]:
    """Decode one ``hop_sql`` row from agtype text."""
    a, e, b, r = (json.loads(str(v)) for v in row)
    return uuid.UUID(a), uuid.UUID(e), uuid.UUID(b), str(r)


def edge_properties(link: Link) -> str:
    """The ``link`` edge's properties as agtype (JSON) text."""
    props: dict[str, Any] = {"id": str(link.id), "rel": link.relation,
                             "vf": micros(link.valid_from)}
    if link.valid_until is not None:
        props["vu"] = micros(link.valid_until)
    return json.dumps(props)


def vertex_properties(memory_id: uuid.UUID) -> str:
    """The ``memory`` vertex's properties as agtype (JSON) text."""
    return json.dumps({"id": str(memory_id)})


def id_key(value: uuid.UUID) -> str:
    """The agtype text ``ID_EXPR`` evaluates to for ``value``."""
    return json.dumps(str(value))
