"""Reference hook: proposes ``related_to`` links from a new memory to similar ones.

Event: ``post_store``, daemon mode (``python -m attested_cortex.hooks.reference.autolink``).
It answers Allow at once, then, off the request path, recalls up to 10 candidates from the
same namespace through the cortex HTTP API and links the new memory to each candidate
whose similarity reaches the threshold (at most ``AUTOLINK_MAX_LINKS``, default 3).

Similarity: cosine of term-frequency vectors of lower-cased words of 3+ letters and their
adjacent pairs (bigrams), minus a short stop-word list; no external model. Threshold
``AUTOLINK_THRESHOLD`` (default 0.5): near-duplicates score above 0.8, unrelated text
near 0. Environment: ``CORTEX_URL`` (required), and the hook's own credentials:
``CORTEX_TOKEN`` (sent as a bearer token), ``CORTEX_TOKEN_FILE`` (a file holding the token,
read for each call since a service-account token rotates; the operator sets it to the pod's
token under Kubernetes auth) or ``CORTEX_AGENT_ID`` (``--auth dev`` only). An ``https://``
cortex is verified against ``CORTEX_CA_FILE`` when that file exists (the operator sets it to
the CA of the server's certificate when the server serves TLS, ADR 0047), else against the
system's roots.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import ssl
import sys
import urllib.request
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from attested_cortex import pki
from attested_cortex.hooks.reference.serving import serve
from attested_cortex.hooks.wire import RawHookRequest

DEFAULT_THRESHOLD: Final = 0.5
DEFAULT_MAX_LINKS: Final = 3
CANDIDATES: Final = 10
_WORD: Final = re.compile(r"[a-z0-9]{3,}")
_STOP: Final = frozenset({
    "the", "and", "for", "are", "but", "not", "you", "with", "this", "that", "from", "have",
    "was", "were", "has", "had", "its", "into",
})


def terms(text: str) -> Counter[str]:
    """Words (3+ characters, no stop words) and adjacent word pairs, counted."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOP]
    return Counter(words) + Counter(f"{a} {b}" for a, b in itertools.pairwise(words))


def cosine(left: Mapping[str, int], right: Mapping[str, int]) -> float:
    """Cosine similarity of two term-frequency vectors (0 when either is empty)."""
    dot = sum(count * right.get(term, 0) for term, count in left.items())
    norm = math.sqrt(sum(c * c for c in left.values())) * math.sqrt(
        sum(c * c for c in right.values())
    )
    return dot / norm if norm else 0.0


@dataclass(frozen=True)
class Proposal:
    """A link the hook wants: from the new memory to ``dst_id``."""

    dst_id: str
    score: float


def propose(
    memory: Mapping[str, Any], candidates: Iterable[Mapping[str, Any]], *,
    threshold: float, max_links: int,
) -> list[Proposal]:
    """Candidates in the same namespace, not the memory itself, at or above ``threshold``."""
    mine = terms(str(memory.get("content", "")))
    scored = [
        Proposal(dst_id=str(c["id"]), score=cosine(mine, terms(str(c.get("content", "")))))
        for c in candidates
        if c.get("id") != memory.get("id") and c.get("namespace") == memory.get("namespace")
    ]
    chosen = sorted((p for p in scored if p.score >= threshold), key=lambda p: -p.score)
    return chosen[:max_links]


class CortexClient:
    """The few calls the hook makes to the cortex HTTP API, with its own credentials."""

    def __init__(self, base_url: str, *, token: str | None, agent_id: str | None,
                 token_file: str | None = None, ca_file: str | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError("CORTEX_URL must be an http:// or https:// URL")
        self._base = base_url.rstrip("/")
        # The operator's CA volume is optional (a user's Secret may hold no ca.crt): absent,
        # the system's roots verify, never nothing.
        ca = Path(ca_file) if ca_file else None
        self._tls: ssl.SSLContext = pki.client_context(ca if ca and ca.is_file() else None)
        self._token_file = None if token else token_file
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        elif agent_id and not token_file:
            self._headers["X-Agent-Id"] = agent_id

    def _request_headers(self) -> dict[str, str]:
        if self._token_file is None:
            return self._headers
        with open(self._token_file, encoding="utf-8") as file:  # re-read: the token rotates
            return {**self._headers, "Authorization": f"Bearer {file.read().strip()}"}

    def post(self, path: str, body: Mapping[str, Any]) -> Any:
        """POST JSON, return the decoded reply; HTTP errors raise."""
        return self._send("POST", path, json.dumps(body).encode())

    def get(self, path: str) -> Any:
        """GET, return the decoded reply; HTTP errors raise."""
        return self._send("GET", path, None)

    def _send(self, method: str, path: str, data: bytes | None) -> Any:
        request = urllib.request.Request(  # noqa: S310 (scheme checked in __init__)
            self._base + path, data=data, headers=self._request_headers(), method=method,
        )
        with urllib.request.urlopen(request, timeout=10,  # noqa: S310
                                    context=self._tls) as reply:
            return json.loads(reply.read() or b"null")


@dataclass(frozen=True)
class AutoLinker:
    """Recalls candidates for a stored memory and creates the proposed links."""

    client: CortexClient
    threshold: float = DEFAULT_THRESHOLD
    max_links: int = DEFAULT_MAX_LINKS

    def link(self, request: RawHookRequest) -> list[Proposal]:
        """Do the work for one ``post_store`` fire; returns the links created."""
        memory = request["payload"]
        query = {"query": str(memory.get("content", ""))[:2000],
                 "namespace": memory.get("namespace"), "limit": CANDIDATES}
        found = self.client.post("/v1/recall", query).get("results", [])
        proposals = propose(memory, found, threshold=self.threshold, max_links=self.max_links)
        for proposal in proposals:
            self.client.post("/v1/links", {"src_id": memory["id"], "dst_id": proposal.dst_id,
                                           "relation": "related_to"})
        return proposals


def allow(request: RawHookRequest) -> dict[str, Any]:
    """The decision: the hook never blocks a store."""
    return {"decision": "allow"}


def main() -> None:
    """Serve on stdio; link after each reply, reporting errors on stderr."""
    linker = AutoLinker(
        client=CortexClient(os.environ["CORTEX_URL"], token=os.environ.get("CORTEX_TOKEN"),
                            agent_id=os.environ.get("CORTEX_AGENT_ID"),
                            token_file=os.environ.get("CORTEX_TOKEN_FILE"),
                            ca_file=os.environ.get("CORTEX_CA_FILE")),
        threshold=float(os.environ.get("AUTOLINK_THRESHOLD", DEFAULT_THRESHOLD)),
        max_links=int(os.environ.get("AUTOLINK_MAX_LINKS", DEFAULT_MAX_LINKS)),
    )

    def after(request: RawHookRequest) -> None:
        if request["event"] != "post_store":
            return
        try:
            made = linker.link(request)
        except (OSError, ValueError, KeyError) as exc:
            print(f"autolink: {request['payload'].get('id')}: {exc}", file=sys.stderr)
            return
        print(f"autolink: {request['payload'].get('id')}: {len(made)} link(s)", file=sys.stderr)

    serve(allow, after=after)


if __name__ == "__main__":
    main()
