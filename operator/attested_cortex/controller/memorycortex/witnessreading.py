"""Reading an operator-run witness's report: ``GET http://<pod IP>:<report port>/report``
of its running pod (ADR 0102). Called by :mod:`.witnesses`.

The pod and its port come from the pods the operator already lists (the container port
named ``report``); the request is bounded (:data:`TIMEOUT_S`) and a pod that is not
running, not ready or does not answer is "unread" (None), never an error: the status keeps
what it showed. The answer is size-bounded JSON; nothing in it is secret.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from attested_cortex.builders import witnesses
from attested_cortex.controller import podreading

Object = dict[str, Any]
TIMEOUT_S: Final = 3.0
MAX_BYTES: Final = 8192


def address(pods: Sequence[Object], witness: str) -> str | None:
    """``http://ip:port`` of the witness's running pod, if one has an IP and the port."""
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        status = pod.get("status") or {}
        if labels.get(witnesses.WITNESS_LABEL) != witness or status.get("phase") != "Running":
            continue
        ports = [p for c in (pod.get("spec") or {}).get("containers") or []
                 for p in c.get("ports") or [] if p.get("name") == "report"]
        if status.get("podIP") and ports and not pod["metadata"].get("deletionTimestamp"):
            return f"http://{status['podIP']}:{int(ports[0]['containerPort'])}"
    return None



async def report(pods: Sequence[Object], witness: str) -> Object | None:
    """The witness's report, or None when it cannot be read now (in a thread: the
    standard library's client, bounded by :data:`TIMEOUT_S`)."""
    base = address(pods, witness)
    if base is None:
        return None
    return await podreading.read_object(f"{base}/report", timeout_s=TIMEOUT_S,
                                        max_bytes=MAX_BYTES)
