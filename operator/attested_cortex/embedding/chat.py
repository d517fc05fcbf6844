"""An OpenAI-compatible chat-completions endpoint (vLLM, Ollama, llama.cpp server, ...), for
the spoke-memory family's optional reflection generator (ADR 0069). It lives beside the
embeddings client (:mod:`.remote`) because it is the same kind of boundary: one bounded HTTP
call to a configured model server, its API key read from a file and never logged.

``POST {url}/chat/completions`` with ``{"model", "messages", "max_tokens", "temperature": 0}``;
the answer's ``choices[0].message.content`` is the text and ``usage`` its cost. Every call is
bounded by ``timeout_s`` (connect included) and the answer's size; anything unexpected raises
:class:`ChatError` with a short reason that names no secret and no content.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from attested_cortex.embedding.base import EmbeddingError
from attested_cortex.embedding.remote import read_bounded

#: Bound on one answer: a reflection is a few kilobytes.
MAX_RESPONSE_BYTES = 4 * 1024 * 1024


class ChatError(Exception):
    """The endpoint gave no usable answer; ``code`` says which way (the receipt's
    ``error_code``): ``generator_timeout``, ``generator_unreachable``, ``generator_refused``
    (an HTTP error status) or ``generator_invalid`` (not a chat completion)."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code


@dataclass(frozen=True)
class ChatAnswer:
    """The text and what it cost (the endpoint's ``usage``, as reported)."""

    text: str
    model: str
    usage: dict[str, int] = field(default_factory=dict)


class ChatClient:
    """Client of one OpenAI-compatible chat-completions endpoint."""

    def __init__(self, url: str, *, model: str, api_key_file: Path | None = None,
                 max_tokens: int = 512) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise EmbeddingError(f"reflection endpoint {url!r} is not an http(s) URL")
        base = url.rstrip("/")
        self._url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.max_tokens = max_tokens
        self._headers = {"Content-Type": "application/json"}
        if api_key_file is not None:
            try:
                key = api_key_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise EmbeddingError(
                    f"cannot read the reflection endpoint's API key file: {exc}") from exc
            self._headers["Authorization"] = f"Bearer {key}"
        self._session: aiohttp.ClientSession | None = None

    @property
    def endpoint(self) -> str:
        """Scheme, host and port only (for capabilities and logs)."""
        parts = urlsplit(self._url)
        return f"{parts.scheme}://{parts.netloc}"

    async def complete(self, messages: list[dict[str, str]], *,
                       timeout_s: float) -> ChatAnswer:
        """One completion of ``messages``, within ``timeout_s``."""
        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = {"model": self.model, "messages": messages, "max_tokens": self.max_tokens,
                "temperature": 0}
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(timeout_s, 2.0))
        try:
            async with self._session.post(self._url, data=json.dumps(body), timeout=timeout,
                                          headers=self._headers) as response:
                status = response.status
                raw = await read_bounded(response.content, MAX_RESPONSE_BYTES) \
                    if status == 200 else b""
        except TimeoutError as exc:
            raise ChatError("generator_timeout",
                            f"the reflection endpoint did not answer within {timeout_s:g} s") \
                from exc
        except aiohttp.ClientError as exc:
            raise ChatError("generator_unreachable",
                            f"the reflection endpoint is unreachable: {type(exc).__name__}") \
                from exc
        except EmbeddingError as exc:  # read_bounded: the answer passed its bound
            raise ChatError("generator_invalid", str(exc).replace("embedder", "endpoint")) \
                from exc
        if status != 200:
            raise ChatError("generator_refused", f"the reflection endpoint answered HTTP {status}")
        return self._answer(raw)

    def _answer(self, raw: bytes) -> ChatAnswer:
        try:
            answer: Any = json.loads(raw)
            text = answer["choices"][0]["message"]["content"]
            usage = answer.get("usage") or {}
            counted = {k: int(v) for k, v in usage.items()
                       if k in ("prompt_tokens", "completion_tokens", "total_tokens")}
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ChatError("generator_invalid",
                            "the reflection endpoint's answer is not a chat completion") from exc
        if not isinstance(text, str) or not text.strip():
            raise ChatError("generator_invalid", "the reflection endpoint answered no text")
        model = answer.get("model")
        return ChatAnswer(text.strip(), model if isinstance(model, str) else self.model,
                          counted)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
