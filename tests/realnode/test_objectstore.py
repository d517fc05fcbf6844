"""The test object store (hack/support/objectstore.py, ADR 0037): MinIO built from its Go
module answers S3 as a real server does: a bucket, a multipart-sized object written, listed,
read back byte for byte, and the server stopped."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from hack.support import objectstore

pytestmark = pytest.mark.realnode


def test_minio_serves_s3_and_stops(tmp_path: Path) -> None:
    store = objectstore.start(tmp_path / "s3", bucket="backups")
    try:
        data = os.urandom(6 * 1024 * 1024)  # past the client's 5 MiB part: a multipart upload
        store.client().put_object(store.bucket, "a/base.tar", io.BytesIO(data), len(data),
                                  part_size=5 * 1024 * 1024)
        assert store.keys("a/") == ["a/base.tar"]
        answer = store.client().get_object(store.bucket, "a/base.tar")
        try:
            assert answer.read() == data
        finally:
            answer.close()
            answer.release_conn()
    finally:
        store.stop()
    assert store.process.poll() is not None
