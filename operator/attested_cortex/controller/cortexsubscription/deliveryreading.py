"""Reading a cortex's delivery report (``GET /v1/delivery-report``, public and secret-free,
ADR 0130) from one of its running server pods, for the CortexSubscription status. Called by
:mod:`attested_cortex.controller.cortexsubscription`.

The report is read from the pod's IP and its container port named ``http`` (as the witness
reports are, ADR 0103): every replica answers the same (the state is in the database), so
the first running pod is enough. Bounded (:data:`TIMEOUT_S`, :data:`MAX_BYTES`), in a thread
(the standard library's client); a cortex serving TLS, no running pod, or no answer is
"unread" (None) and the status keeps what it showed.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Sequence
from typing import Any, Final

from attested_cortex.builders import names as n
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
TIMEOUT_S: Final = 3.0
MAX_BYTES: Final = 1 << 20
PATH: Final = "/v1/delivery-report"


def address(pods: Sequence[Object]) -> str | None:
    """``http://ip:port`` of a running server pod, if one has an IP and the port."""
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            continue
        ports = [p for c in (pod.get("spec") or {}).get("containers") or []
                 for p in c.get("ports") or [] if p.get("name") == "http"]
        if status.get("podIP") and ports:
            return f"http://{status['podIP']}:{int(ports[0]['containerPort'])}"
    return None


def _fetch(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:  # noqa: S310
            return bytes(answer.read(MAX_BYTES + 1)) if answer.status == 200 else None
    except (OSError, ValueError):  # refused, reset, timed out, an HTTP error
        return None


async def report(rt: Runtime, cortex: Object) -> Object | None:
    """The cortex's delivery report, or None when it cannot be read now."""
    if ((cortex.get("spec") or {}).get("server") or {}).get("tls") is not None:
        return None  # the operator holds no trust for the server's certificate here
    meta = cortex["metadata"]
    selector = ",".join(f"{k}={v}" for k, v in n.selector(meta["name"], "server").items())
    pods = await rt.writer.list("v1", "Pod", meta.get("namespace"), selector)
    base = address(pods)
    if base is None:
        return None
    body = await asyncio.to_thread(_fetch, f"{base}{PATH}")
    if body is None or len(body) > MAX_BYTES:
        return None
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return found if isinstance(found, dict) and found.get("enabled") is True else None
