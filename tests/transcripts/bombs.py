"""zstd bombs for the tests: small frames that inflate to far more than any limit."""

from __future__ import annotations

import zstandard


def streamed_bomb(inflated: int, *, byte: bytes = b"a") -> bytes:
    """A frame of ``inflated`` bytes that does not declare its size (written streaming), so
    only a bounded read can stop it."""
    compressor = zstandard.ZstdCompressor(level=19).compressobj()
    chunk = byte * (1024 * 1024)
    parts = [compressor.compress(chunk) for _ in range(inflated // len(chunk))]
    return b"".join(parts) + compressor.flush()


def declared_bomb(inflated: int) -> bytes:
    """A frame that declares (honestly) a content size of ``inflated`` bytes."""
    return zstandard.ZstdCompressor(level=19, write_content_size=True).compress(
        b"a" * inflated)
