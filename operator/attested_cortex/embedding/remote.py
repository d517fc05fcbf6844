"""An OpenAI-compatible embeddings endpoint (text-embeddings-inference, Ollama, vLLM, ...).

``POST {url}/embeddings`` with ``{"model", "input": [texts]}``; the answer's ``data[i].embedding``
are the vectors. Every call is bounded by the caller's timeout (connect included) and the
answer's size; anything unexpected raises :class:`EmbeddingError`, never more. The model name
is the configured one, else the one the endpoint names in its first answer; the dimension is
the configured one, else that of the first vector. A later answer of another dimension is an
error (vectors of two dimensions would not be comparable).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from attested_cortex.embedding.base import (
    EmbedderInfo,
    EmbeddingError,
    EmbeddingRefusedError,
    chunked,
)
from attested_cortex.embedding.vectors import check_vectors

#: Bound on one answer: 64 texts of 4096 floats as JSON stay far below it.
MAX_RESPONSE_BYTES = 32 * 1024 * 1024
#: Bound on one text sent: endpoints truncate or refuse long inputs anyway.
MAX_TEXT_CHARS = 8192
#: Texts per request: text-embeddings-inference refuses more than 32 by default
#: (``max_client_batch_size``), and a write-behind batch of 64 was refused whole.
REQUEST_TEXTS = 32
#: Characters per request (each text cut to MAX_TEXT_CHARS first): a request's time grows
#: with its text, and each has the whole deadline.
REQUEST_CHARS = 128 * 1024
#: HTTP statuses that are about the endpoint or the caller, not about the texts sent: the
#: same texts may succeed later, so they are never blamed on one memory.
_NOT_ABOUT_THE_TEXTS = frozenset({401, 403, 404, 405, 407, 408, 429})


async def read_bounded(content: aiohttp.StreamReader, limit: int) -> bytes:
    """The whole body, or :class:`EmbeddingError` once it passes ``limit`` bytes.

    ``content.read(n)`` answers what is buffered (one network read), not ``n`` bytes: an
    answer of a few hundred kilobytes came back cut, and was "not an embeddings list".
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in content.iter_chunked(256 * 1024):
        size += len(chunk)
        if size > limit:
            raise EmbeddingError(f"the embedder's answer is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


class RemoteEmbedder:
    """Client of one OpenAI-compatible endpoint."""

    def __init__(self, url: str, *, model: str | None = None, dimension: int | None = None,
                 api_key_file: Path | None = None) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise EmbeddingError(f"--embedder {url!r} is not an http(s) URL")
        base = url.rstrip("/")
        self._url = base if base.endswith("/embeddings") else base + "/embeddings"
        self._requested_model = model
        self._info = EmbedderInfo("remote", model or "", dimension)
        self._headers = {"Content-Type": "application/json"}
        if api_key_file is not None:
            try:
                key = api_key_file.read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise EmbeddingError(f"cannot read the embedder API key file: {exc}") from exc
            self._headers["Authorization"] = f"Bearer {key}"
        self._session: aiohttp.ClientSession | None = None

    @property
    def info(self) -> EmbedderInfo:
        return self._info

    @property
    def embeds(self) -> bool:
        return True

    @property
    def ready(self) -> bool:
        """Whether model and dimension are known (the endpoint has answered once)."""
        return bool(self._info.model) and self._info.dimension is not None

    async def embed(self, texts: Sequence[str], *, timeout_s: float,
                    background: bool = False) -> list[list[float]]:
        """One request per :data:`REQUEST_TEXTS` texts and :data:`REQUEST_CHARS` characters,
        each within ``timeout_s``."""
        out: list[list[float]] = []
        for request in chunked(texts, max_texts=REQUEST_TEXTS, max_chars=REQUEST_CHARS):
            out += await self._request(request, timeout_s=timeout_s)
        return out

    async def _request(self, texts: Sequence[str], *, timeout_s: float) -> list[list[float]]:
        if not texts:
            return []
        if self._session is None:
            self._session = aiohttp.ClientSession()
        body = {"model": self._requested_model or "default",
                "input": [t[:MAX_TEXT_CHARS] for t in texts]}
        timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(timeout_s, 2.0))
        try:
            async with self._session.post(self._url, data=json.dumps(body), timeout=timeout,
                                          headers=self._headers) as response:
                status = response.status
                raw = await read_bounded(response.content, MAX_RESPONSE_BYTES) \
                    if status == 200 else b""
        except TimeoutError as exc:
            raise EmbeddingError(f"the embedder did not answer within {timeout_s}s") from exc
        except aiohttp.ClientError as exc:
            raise EmbeddingError(f"the embedder is unreachable: {exc}") from exc
        if 400 <= status < 500 and status not in _NOT_ABOUT_THE_TEXTS:
            raise EmbeddingRefusedError(f"the embedder refused the texts: HTTP {status}")
        if status != 200:
            raise EmbeddingError(f"the embedder answered HTTP {status}")
        return self._vectors(raw, len(texts))

    def _vectors(self, raw: bytes, count: int) -> list[list[float]]:
        try:
            answer = json.loads(raw)
            items = sorted(answer["data"], key=lambda d: int(d.get("index", 0)))
            vectors = [[float(x) for x in item["embedding"]] for item in items]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise EmbeddingError(f"the embedder's answer is not an embeddings list: {exc}") \
                from exc
        if len(vectors) != count:
            raise EmbeddingError(f"the embedder returned {len(vectors)} vectors for {count} texts")
        dims = {len(v) for v in vectors}
        if len(dims) != 1 or 0 in dims:
            raise EmbeddingError(f"the embedder returned vectors of dimensions {sorted(dims)}")
        check_vectors(vectors)
        (dim,) = dims
        if self._info.dimension is not None and dim != self._info.dimension:
            raise EmbeddingError(
                f"the embedder returned {dim}-dimension vectors; this server expects "
                f"{self._info.dimension} (model {self._info.model})"
            )
        if not self.ready:
            model = self._info.model or str(answer.get("model") or "") \
                or f"remote:{urlsplit(self._url).netloc}"
            self._info = EmbedderInfo("remote", model[:200], dim)
        return vectors

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
