"""The pure core of transcripts: frames (level 3, bounded inflation against bombs), spans
(every malformed citation a clear 400) and retention (where on, how long)."""

from __future__ import annotations

import resource
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import zstandard

from attested_cortex.errors import InvalidInputError, TooLargeError
from attested_cortex.server.configuring import retention_from
from attested_cortex.server.settings import ServerSettings
from attested_cortex.transcripts import framing
from attested_cortex.transcripts.spans import Span, check_spans, cut
from tests.transcripts.bombs import declared_bomb, streamed_bomb

T1, T2 = uuid.uuid4(), uuid.uuid4()


def test_a_frame_is_zstd_level_3_and_round_trips() -> None:
    text = "user: où est la clé?\nagent: sous le paillasson 🔑\n" * 50
    frame = framing.compress(text)
    assert frame[:4] == b"\x28\xb5\x2f\xfd"  # the zstd magic number
    params = zstandard.get_frame_parameters(frame)
    assert params.content_size == len(text.encode())
    assert len(frame) < len(text.encode()) / 5
    assert framing.inflate_text(frame, max_bytes=len(text.encode())) == text


def test_a_streamed_bomb_stops_at_the_bound_without_inflating() -> None:
    bomb = streamed_bomb(512 * 1024 * 1024)  # 512 MiB in a few kilobytes
    assert len(bomb) < 64 * 1024
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(TooLargeError) as caught:
        framing.inflate(bomb, max_bytes=1024 * 1024)
    assert caught.value.code == "transcript_too_large"
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert grown_kib < 64 * 1024  # never more than a few MiB past the bound, not 512 MiB


def test_a_declared_bomb_is_refused_from_its_header() -> None:
    with pytest.raises(TooLargeError):
        framing.inflate(declared_bomb(8 * 1024 * 1024), max_bytes=1024 * 1024)


@pytest.mark.parametrize("frame", [b"", b"not zstd at all", framing.compress("x" * 100)[:-3]])
def test_garbage_is_a_bad_frame(frame: bytes) -> None:
    with pytest.raises(InvalidInputError) as caught:
        framing.inflate(frame, max_bytes=1024)
    assert caught.value.code == "bad_frame"


def test_a_frame_of_bytes_that_are_not_utf8_is_refused() -> None:
    frame = zstandard.ZstdCompressor().compress(b"\xff\xfe caf\xe9")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        framing.inflate_text(frame, max_bytes=1024)


def test_spans_cut_characters_not_bytes() -> None:
    text = "é🔑abc"
    check_spans([Span(T1, 1, 3)], {T1: len(text)})
    assert cut(text, Span(T1, 1, 3)) == "🔑a"


@pytest.mark.parametrize(("spans", "code"), [
    ([Span(T1, 5, 5)], "bad_span"),
    ([Span(T1, 6, 5)], "bad_span"),
    ([Span(T1, 0, 11)], "bad_span"),
    ([Span(T1, 2**31 - 2, 2**31 - 1)], "bad_span"),
    ([Span(T1, 0, 5), Span(T1, 4, 8)], "overlapping_spans"),
    ([Span(T1, 0, 10), Span(T2, 0, 3), Span(T1, 2, 3)], "overlapping_spans"),
])
def test_bad_spans_are_400(spans: list[Span], code: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        check_spans(spans, {T1: 10, T2: 3})
    assert caught.value.code == code


def test_adjacent_spans_and_spans_of_different_transcripts_are_fine() -> None:
    check_spans([Span(T1, 5, 10), Span(T2, 0, 3), Span(T1, 0, 5)], {T1: 10, T2: 3})


def policy(**transcripts: object) -> ServerSettings:
    return ServerSettings(transcripts=transcripts)


def test_off_by_default_everywhere() -> None:
    retention = retention_from(ServerSettings())
    assert retention.rule_for("any/where") is None and retention.describe() == []


def test_namespaces_first_match_wins_with_their_own_retention() -> None:
    retention = retention_from(policy(
        enabled=True, retention_days=30,
        namespaces=[{"namespace": "support/vip/**", "retention_days": 365},
                    {"namespace": "support/**"}, {"namespace": "scratch/*", "retention_days": 1}]))
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert retention.archive_before("support/vip/acme", now) == now - timedelta(days=365)
    assert retention.archive_before("support/acme", now) == now - timedelta(days=30)
    assert retention.archive_before("scratch/x", now) == now - timedelta(days=1)
    assert retention.rule_for("scratch/x/y") is None and retention.rule_for("other") is None
    assert retention.describe()[1] == {"namespace": "support/**", "retention_days": 30}


def test_a_namespace_no_longer_open_keeps_the_cortex_wide_retention() -> None:
    retention = retention_from(policy(enabled=False, retention_days=10))
    now = datetime(2026, 11, 30, tzinfo=UTC)
    assert retention.archive_before("was/open", now) == now - timedelta(days=10)


def test_a_bad_namespace_pattern_stops_start_up() -> None:
    with pytest.raises(InvalidInputError):
        retention_from(policy(enabled=True, namespaces=[{"namespace": "a//b"}]))
