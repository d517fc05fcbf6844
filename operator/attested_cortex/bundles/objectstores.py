"""Bundles in an S3-compatible object store: ``s3://bucket/path`` as an export target, an
import source, and the retention of the scheduled logical backup (issue 24, ADR 0041).

The only module that imports the S3 client library (``minio``, Apache-2.0; import-linter
keeps it here). Called by ``cortexctl export --to`` / ``cortexctl import --from`` and so by
the operator's logical backup CronJob. Layout under ``path``: one bundle per export, in a
folder named by the export's UTC time (``20261202T131500.123456Z``), so names sort by
age; a bundle is complete once its ``manifest.json`` is there (the export writes it last),
and only complete bundles count for retention and restore. The client is synchronous; the
export's sink runs each upload in a worker thread so the database snapshot's event loop
is not blocked. Credentials come from the usual environment variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL``, ``AWS_REGION``)
and never appear in an argument, a log line or an error message.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import urllib3
from minio import Minio
from minio.deleteobjects import DeleteObject
from minio.error import MinioException, S3Error

from attested_cortex.bundles.formats import MANIFEST
from attested_cortex.errors import CortexError, InvalidInputError

SCHEME = "s3://"
#: Fixed width, to the microsecond: names sort as times do, and two runs never share one.
STAMP_FORMAT = "%Y%m%dT%H%M%S.%fZ"
ENV_ENDPOINT, ENV_REGION = "AWS_ENDPOINT_URL", "AWS_REGION"
ENV_ACCESS_KEY, ENV_SECRET_KEY = "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"


class ObjectStoreError(CortexError):
    """The object store refused a request or could not be reached (code
    ``object_store_unreachable`` or the store's own S3 error code)."""


@dataclass(frozen=True, slots=True)
class Location:
    """``s3://bucket/prefix``: a bucket and a folder in it (no leading or trailing ``/``)."""

    bucket: str
    prefix: str

    def key(self, *parts: str) -> str:
        """The object name of ``parts`` under the prefix."""
        return "/".join(p for p in (self.prefix, *parts) if p)

    def url(self) -> str:
        return f"{SCHEME}{self.key_url()}"

    def key_url(self) -> str:
        return "/".join(p for p in (self.bucket, self.prefix) if p)


def parse_location(url: str) -> Location:
    """``s3://bucket[/path]`` as a :class:`Location`; 400 for anything else."""
    if not url.startswith(SCHEME):
        raise InvalidInputError(f"object store location must start with {SCHEME}",
                                field="location")
    bucket, _, prefix = url[len(SCHEME):].partition("/")
    if not bucket:
        raise InvalidInputError("object store location names no bucket", field="location")
    return Location(bucket, prefix.strip("/"))


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where the store answers and the credentials it takes (never printed)."""

    endpoint: str
    access_key: str = field(repr=False)
    secret_key: str = field(repr=False)
    region: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, endpoint: str | None = None) -> StoreSettings:
        """From ``AWS_*`` variables; ``endpoint`` (an ``--endpoint`` flag) wins."""
        url = endpoint or env.get(ENV_ENDPOINT)
        access, secret = env.get(ENV_ACCESS_KEY), env.get(ENV_SECRET_KEY)
        if not url:
            raise InvalidInputError(f"no object store endpoint: pass --endpoint or set "
                                    f"{ENV_ENDPOINT}", field="endpoint")
        if not access or not secret:
            raise InvalidInputError(f"object store credentials missing: set {ENV_ACCESS_KEY} "
                                    f"and {ENV_SECRET_KEY}", field="credentials")
        return cls(url, access, secret, env.get(ENV_REGION) or None)


class BundleStore:
    """The bundles under one :class:`Location` of one store."""

    def __init__(self, settings: StoreSettings, location: Location) -> None:
        parts = urlsplit(settings.endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidInputError("object store endpoint must be an http:// or https:// "
                                    "URL", field="endpoint")
        # a bounded retry: a store that is away fails the export in seconds, not minutes
        pool = urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=60),
                                   retries=urllib3.Retry(total=2, backoff_factor=0.5))
        self.client = Minio(parts.netloc, access_key=settings.access_key,
                            secret_key=settings.secret_key, secure=parts.scheme == "https",
                            region=settings.region, http_client=pool)
        self.location = location

    def sink(self, bundle: str) -> ObjectSink:
        """Where an export writes the new bundle ``bundle``."""
        return ObjectSink(self, bundle)

    def put(self, name: str, data: bytes) -> None:
        with _translating(self.location):
            self.client.put_object(self.location.bucket, name, io.BytesIO(data), len(data))

    def bundles(self) -> list[str]:
        """The complete bundles under the location, oldest first (by name)."""
        base, suffix = self._base(), "/" + MANIFEST
        with _translating(self.location):
            names = [str(o.object_name) for o in self.client.list_objects(
                self.location.bucket, prefix=base, recursive=True)]
        folders = (n[len(base):-len(suffix)] for n in names if n.endswith(suffix))
        return sorted(f for f in folders if f and "/" not in f)

    def download(self, bundle: str | None, dest: Path) -> str:
        """Every file of ``bundle`` (the newest complete one when None) into ``dest``."""
        found = self.bundles()
        chosen = bundle if bundle is not None else (found[-1] if found else None)
        if chosen is None or chosen not in found:
            raise ObjectStoreError(f"no complete bundle {chosen or ''} under "
                                   f"{self.location.url()}", code="bundle_not_found")
        prefix = self.location.key(chosen) + "/"
        with _translating(self.location):
            for obj in self.client.list_objects(self.location.bucket, prefix=prefix,
                                                recursive=True):
                name = str(obj.object_name)
                target = (dest / name[len(prefix):]).resolve()
                if not target.is_relative_to(dest.resolve()):  # a key with ../ in it
                    raise ObjectStoreError(f"object {name} would be written outside the "
                                           "bundle's directory", code="bad_object_name")
                target.parent.mkdir(parents=True, exist_ok=True)
                self.client.fget_object(self.location.bucket, name, str(target))
        return chosen

    def prune(self, keep: int) -> list[str]:
        """Keep the newest ``keep`` (at least 1) complete bundles: delete every object of
        an older bundle, complete or left incomplete by a failed export; the complete ones
        deleted. A bundle newer than the oldest kept one (an export under way) stays."""
        complete = self.bundles()
        if len(complete) <= max(keep, 1):
            return []
        oldest_kept = complete[-max(keep, 1)]
        base = self._base()
        with _translating(self.location):
            names = [str(o.object_name) for o in self.client.list_objects(
                self.location.bucket, prefix=base, recursive=True)]
            gone = [n for n in names
                    if "/" in n[len(base):] and _bundle_of(n, base) < oldest_kept]
            errors = list(self.client.remove_objects(
                self.location.bucket, (DeleteObject(n) for n in gone)))
        if errors:
            raise ObjectStoreError(f"retention could not delete {len(errors)} objects under "
                                   f"{self.location.url()}: {errors[0].code}",
                                   code="retention_failed")
        return [b for b in complete if b < oldest_kept]

    def _base(self) -> str:
        return self.location.key() + "/" if self.location.prefix else ""


def _bundle_of(name: str, base: str) -> str:
    return name[len(base):].partition("/")[0]


@dataclass(frozen=True, slots=True)
class ObjectSink:
    """An export's sink (:class:`~.exporting.SinkFn`): each file an object of the bundle."""

    store: BundleStore
    bundle: str

    async def __call__(self, name: str, data: bytes) -> None:
        await asyncio.to_thread(self.store.put, self.store.location.key(self.bundle, name),
                                data)


def bundle_name(moment: datetime) -> str:
    """The folder of a bundle exported at ``moment`` (UTC): names sort as times do."""
    return moment.strftime(STAMP_FORMAT)


@contextmanager
def _translating(location: Location) -> Iterator[None]:
    """The client's errors as :class:`ObjectStoreError` (S3 codes kept; no credentials)."""
    try:
        yield
    except S3Error as exc:
        raise ObjectStoreError(f"the object store refused a request under {location.url()}: "
                               f"{exc.code} ({exc.message})", code=str(exc.code)) from exc
    except (MinioException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise ObjectStoreError(f"the object store at {location.url()} could not be reached "
                               f"({type(exc).__name__})", code="object_store_unreachable"
                               ) from exc
