"""Reference hook: masks credentials in memory content before it is stored.

Events: ``pre_store``, ``pre_update`` and ``pre_transcript_store`` (Modify). Run as
``python -m attested_cortex.hooks.reference.redact`` in exec or daemon mode. Every match in
``content`` and ``title`` is replaced by ``[REDACTED:<kind>]``; with nothing to mask the
hook answers Allow. Patterns (:data:`PATTERNS`) cover PEM private key blocks, AWS access
key ids and secret keys, bearer tokens, GitHub, Slack, OpenAI/Anthropic-style and Google
API keys, and ``api_key=...``-style assignments. Pure apart from :func:`main`.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Final

from attested_cortex.hooks.reference.serving import serve
from attested_cortex.hooks.wire import RawHookRequest

#: (kind, pattern) in the order they are applied; earlier, larger matches win.
PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("private_key", re.compile(
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
        re.DOTALL,
    )),
    ("aws_access_key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("aws_secret_key", re.compile(
        r"(?i)(aws_secret_access_key\s*[:=]\s*[\"']?)[A-Za-z0-9/+=]{40}"
    )),
    ("bearer_token", re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{16,}")),
    ("github_token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("slack_token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("api_key", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}\b")),
    ("google_api_key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("api_key", re.compile(
        r"(?i)(\b(?:api[_-]?key|secret|token|password)\s*[:=]\s*[\"']?)(?!\[REDACTED)[^\s\"']{12,}"
    )),
)
FIELDS: Final = ("content", "title")


def redact(text: str) -> tuple[str, list[str]]:
    """Mask every credential in ``text``; returns the new text and the kinds found."""
    found: list[str] = []
    for kind, pattern in PATTERNS:
        text, count = pattern.subn(functools.partial(_mask, kind=kind), text)
        found.extend([kind] * count)
    return text, found


def _mask(match: re.Match[str], *, kind: str) -> str:
    prefix = match.group(1) if match.re.groups else ""
    return f"{prefix}[REDACTED:{kind}]"


def decide(request: RawHookRequest) -> dict[str, Any]:
    """Modify with the masked fields, or Allow when there is nothing to mask."""
    delta: dict[str, Any] = {}
    for field in FIELDS:
        value = request["payload"].get(field)
        if isinstance(value, str):
            masked, found = redact(value)
            if found:
                delta[field] = masked
    return {"decision": "modify", "delta": delta} if delta else {"decision": "allow"}


def main() -> None:
    """Serve :func:`decide` on stdio."""
    serve(decide)


if __name__ == "__main__":
    main()
