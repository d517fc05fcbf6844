"""JSON views of domain objects: what the API returns and what hooks receive."""

from __future__ import annotations

from attested_cortex.service.pipeline.wire_views import memory_view

__all__ = ["memory_view"]
