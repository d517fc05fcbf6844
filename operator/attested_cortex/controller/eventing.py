"""Kubernetes Events about the custom resources (``kubectl describe`` shows them).

An event that cannot be posted is logged and dropped: events are a courtesy, never a
reason to fail a reconcile.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime

from attested_cortex.builders.inputs import Meta
from attested_cortex.builders.names import MANAGED_BY
from attested_cortex.controller.applying import Writer
from attested_cortex.crd import GROUP, VERSION
from attested_cortex.kubeclient import ApiError

log = logging.getLogger(__name__)


def now() -> str:
    """RFC 3339 in UTC, second precision (the metav1.Time format)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def post_event(writer: Writer, *, kind: str, meta: Meta, type_: str, reason: str,
                     message: str) -> None:
    """Post one core/v1 Event about ``meta``."""
    stamp = now()
    event = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{meta.name}.{uuid.uuid4().hex[:16]}",
                     "namespace": meta.namespace},
        "involvedObject": {"apiVersion": f"{GROUP}/{VERSION}", "kind": kind,
                           "name": meta.name, "namespace": meta.namespace, "uid": meta.uid},
        "type": type_, "reason": reason, "message": message[:1024],
        "source": {"component": MANAGED_BY}, "reportingComponent": MANAGED_BY,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
    }
    try:
        await writer.create(event)
    except ApiError as exc:
        log.warning("event not posted", extra={"kind": kind, "object": meta.name,
                                               "reason": reason, "error": str(exc)})
