"""Reading a cortex's delivery report (``GET /v1/delivery-report``, public and secret-free,
ADR 0130) from one of its running server pods, for the CortexSubscription status. Called by
:mod:`attested_cortex.controller.cortexsubscription`.

The report is read from the pod's IP and its container port named ``http`` or ``https`` (as
the witness reports are, ADR 0103): every replica answers the same (the state is in the
database), so the first running pod is enough. Over TLS the server's chain is verified
against the CA in the server's certificate Secret (``ca.crt``); the pod IP is not among the
certificate's names, so the name is not checked: the CA is the cortex's own trust. Bounded
(:data:`TIMEOUT_S`, :data:`MAX_BYTES`), in a thread (the standard library's client); no
running pod, no CA, or no answer is "unread" (None) and the status keeps what it showed.
"""

from __future__ import annotations

import base64
import binascii
import ssl
from collections.abc import Sequence
from typing import Any, Final

from attested_cortex.builders import certificates
from attested_cortex.builders import names as n
from attested_cortex.builders.inputs import parse_cortex
from attested_cortex.controller import podreading
from attested_cortex.controller.runtime import Runtime

Object = dict[str, Any]
TIMEOUT_S: Final = 3.0
MAX_BYTES: Final = 1 << 20
PATH: Final = "/v1/delivery-report"


def address(pods: Sequence[Object], scheme: str = "http") -> str | None:
    """``<scheme>://ip:port`` of a running server pod, if one has an IP and the port."""
    for pod in pods:
        status = pod.get("status") or {}
        if status.get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            continue
        ports = [p for c in (pod.get("spec") or {}).get("containers") or []
                 for p in c.get("ports") or [] if p.get("name") == scheme]
        if status.get("podIP") and ports:
            return f"{scheme}://{status['podIP']}:{int(ports[0]['containerPort'])}"
    return None



async def report(rt: Runtime, cortex: Object) -> Object | None:
    """The cortex's delivery report, or None when it cannot be read now."""
    meta = cortex["metadata"]
    trust: ssl.SSLContext | None = None
    if ((cortex.get("spec") or {}).get("server") or {}).get("tls") is not None:
        trust = await _trust(rt, cortex)
        if trust is None:
            return None
    selector = ",".join(f"{k}={v}" for k, v in n.selector(meta["name"], "server").items())
    pods = await rt.writer.list("v1", "Pod", meta.get("namespace"), selector)
    base = address(pods, "https" if trust is not None else "http")
    if base is None:
        return None
    found = await podreading.read_object(f"{base}{PATH}", timeout_s=TIMEOUT_S,
                                         max_bytes=MAX_BYTES, trust=trust)
    return found if found is not None and found.get("enabled") is True else None


async def _trust(rt: Runtime, cortex: Object) -> ssl.SSLContext | None:
    """A client context trusting the CA of the server's certificate Secret (None without
    one): the chain is verified, the name is not (the pod IP is not in the certificate)."""
    parsed = parse_cortex(cortex)
    name = certificates.server_secret(parsed)
    if name is None:
        return None
    namespace = parsed.meta.namespace
    secret = await rt.writer.get("v1", "Secret", namespace, name)  # the views hold no data
    encoded = ((secret or {}).get("data") or {}).get(certificates.CA_KEY)
    if not encoded:
        return None
    try:
        trust = ssl.create_default_context(cadata=base64.b64decode(encoded).decode())
    except (binascii.Error, UnicodeDecodeError, ssl.SSLError, ValueError):
        return None
    trust.check_hostname = False
    return trust
