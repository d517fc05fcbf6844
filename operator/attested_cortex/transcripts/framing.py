"""zstd frames of transcript text: compress at level 3, inflate within a bound.

A stored transcript is one zstd frame of its UTF-8 text. Inflating is streamed with a hard
output bound, so a frame that claims or produces more than ``max_bytes`` (a zstd bomb: a few
kilobytes that inflate to gigabytes) is refused after reading at most ``max_bytes + 1``
bytes, never exhausting memory. Called by
:mod:`attested_cortex.service.resources.transcripts` (store, imported frames, replay) and
the benchmark. Pure apart from the codec.
"""

from __future__ import annotations

import io
from typing import Final

import zstandard

from attested_cortex.errors import InvalidInputError, TooLargeError

#: The level seed 000 names: a balance of CPU against ratio (docs/benchmarks/transcripts.json).
LEVEL: Final = 3
_CHUNK: Final = 64 * 1024


def compress(text: str) -> bytes:
    """``text`` as one zstd frame (level 3, content size recorded in the header)."""
    return zstandard.ZstdCompressor(level=LEVEL, write_content_size=True).compress(
        text.encode("utf-8"))


def inflate(frame: bytes, *, max_bytes: int) -> bytes:
    """The bytes in ``frame``: :class:`~attested_cortex.errors.TooLargeError` past
    ``max_bytes``, InvalidInputError for anything but exactly one whole zstd frame.

    A first, streaming pass counts the output in chunks it discards, stopping one byte past
    the bound, so a bomb costs at most a chunk of memory; only a frame proven to fit is
    inflated for keeps (a frame's output is deterministic, so the second pass fits too).
    """
    declared = _declared_size(frame)
    if declared is not None and declared > max_bytes:
        raise _too_large(max_bytes)
    decompressor = zstandard.ZstdDecompressor()
    try:
        size = 0
        with decompressor.stream_reader(io.BytesIO(frame), read_across_frames=False) as reader:
            while chunk := reader.read(min(_CHUNK, max_bytes + 1 - size)):
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(max_bytes)
        whole = decompressor.decompressobj()
        out = whole.decompress(frame)
    except zstandard.ZstdError as exc:
        raise _bad(f"not a valid zstd frame: {exc}") from exc
    if not whole.eof or whole.unused_data or len(out) != size:
        raise _bad("the zstd frame is truncated or followed by other data")
    return out


def inflate_text(frame: bytes, *, max_bytes: int) -> str:
    """:func:`inflate`, then strict UTF-8."""
    raw = inflate(frame, max_bytes=max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad(f"the frame's text is not UTF-8 (byte {exc.start})") from exc


def _declared_size(frame: bytes) -> int | None:
    """The content size the frame header declares, when it declares one."""
    try:
        size = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise _bad(f"not a valid zstd frame: {exc}") from exc
    return None if size < 0 else int(size)


def _bad(message: str) -> InvalidInputError:
    return InvalidInputError(message, code="bad_frame", field="frame")


def _too_large(max_bytes: int) -> TooLargeError:
    return TooLargeError(f"the transcript inflates past {max_bytes} bytes", field="content",
                         limit=max_bytes, code="transcript_too_large")
