"""The bundle's pure parts with plain values: COPY text read back, tar members, manifests."""

from __future__ import annotations

import io
import tarfile

import pytest

from attested_cortex.bundles import BundleError, copytext, manifests, tarring


def test_copy_text_fields_read_back_with_their_escapes_and_nulls() -> None:
    line = b"a\\tb\\nc\\\\d\t\\N\t\\\\x00ff\n"
    (fields,) = list(copytext.rows(line))
    assert fields == ["a\tb\nc\\d", None, "\\x00ff"]
    (raw,) = list(copytext.raw_rows(line))
    assert copytext.bytea(raw[2]) == b"\x00\xff"


def test_tar_members_stream_into_the_bundle_layout() -> None:
    stream = tarring.member("chunks/a-000000.copy", b"x" * 700) + tarring.member(
        "manifest.json", b"{}") + tarring.END
    with tarfile.open(fileobj=io.BytesIO(stream), mode="r|") as archive:
        found = {m.name: archive.extractfile(m).read() for m in archive}  # type: ignore[union-attr]
    assert found == {"chunks/a-000000.copy": b"x" * 700, "manifest.json": b"{}"}


def test_a_newer_bundle_version_is_refused_with_what_to_do() -> None:
    raw = manifests.render({"schema_version": 11}).replace(b'"version": 1', b'"version": 9')
    with pytest.raises(BundleError, match="upgrade cortexctl"):
        manifests.parse(raw)
