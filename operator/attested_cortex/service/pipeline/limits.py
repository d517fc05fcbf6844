"""Size and count limits of the API, one frozen value shared by the server and the service.

``/v1/capabilities`` reports exactly these numbers, so what is advertised is what is enforced.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from attested_cortex.store.graph.base import MAX_PATH_DEPTH, MAX_QUERY_DEPTH


@dataclass(frozen=True)
class Limits:
    """Every bound the API enforces."""

    max_body_bytes: int = 1024 * 1024
    #: The body of ``POST /v1/memories:batch`` (up to ``max_batch_memories`` memories).
    max_batch_body_bytes: int = 16 * 1024 * 1024
    max_batch_memories: int = 1000
    max_content_chars: int = 256 * 1024
    max_metadata_bytes: int = 16 * 1024
    max_title_chars: int = 512
    max_tags: int = 64
    max_recall_limit: int = 100
    recall_pool: int = 200
    max_kg_depth: int = MAX_QUERY_DEPTH
    max_kg_path_hops: int = MAX_PATH_DEPTH
    body_read_timeout_s: int = 30
    #: JSON bytes of one recall or listing answer (ADR 0020): items past it are left for
    #: the next page (listings) or named by id (recall); never fewer than one.
    max_answer_bytes: int = 4 * 1024 * 1024
    #: Bytes one spoke-memory import may stage (its reassembled bundle), and bytes one
    #: principal may hold staged over all its imports not yet activated or discarded
    #: (ADR 0084): a staged import is verified in memory, so both bound the server's.
    max_import_bytes: int = 64 * 1024 * 1024
    max_staged_bytes_per_agent: int = 256 * 1024 * 1024
    #: A write's database work, its commit and a synchronous replica's confirmation included
    #: (``service/pipeline/deadlines.py``, ADR 0090): past it, 503 ``commit_unconfirmed``.
    write_timeout_ms: int = 10_000

    def as_dict(self) -> dict[str, int]:
        """The limits as plain JSON."""
        return asdict(self)
