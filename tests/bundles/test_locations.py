"""Object store locations, settings and bundle names, without a store: what ``cortexctl
export --to`` / ``import --from`` accept before any request is made. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from attested_cortex.bundles.objectstores import (
    Location,
    StoreSettings,
    bundle_name,
    parse_location,
)
from attested_cortex.errors import InvalidInputError


def test_a_location_is_a_bucket_and_a_folder() -> None:
    assert parse_location("s3://backups/team/a/") == Location("backups", "team/a")
    assert parse_location("s3://backups") == Location("backups", "")
    assert Location("backups", "team/a").key("b1", "manifest.json") == "team/a/b1/manifest.json"
    assert Location("backups", "").key("b1") == "b1"
    assert Location("backups", "team/a").url() == "s3://backups/team/a"


@pytest.mark.parametrize("url", ["https://backups/x", "s3://", "s3:///x", "/tmp/x"])
def test_anything_else_is_refused(url: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_location(url)


def test_settings_come_from_the_environment_and_never_print_the_secret() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_ACCESS_KEY_ID": "id",
           "AWS_SECRET_ACCESS_KEY": "s3cr3t"}
    settings = StoreSettings.from_env(env)
    assert (settings.endpoint, settings.access_key, settings.region) == (
        "http://127.0.0.1:9000", "id", None)
    assert "s3cr3t" not in repr(settings)
    assert StoreSettings.from_env(env, endpoint="https://s3.x").endpoint == "https://s3.x"
    with pytest.raises(InvalidInputError, match="AWS_SECRET_ACCESS_KEY"):
        StoreSettings.from_env({**env, "AWS_SECRET_ACCESS_KEY": ""})
    with pytest.raises(InvalidInputError, match="--endpoint"):
        StoreSettings.from_env({k: v for k, v in env.items() if k != "AWS_ENDPOINT_URL"})


def test_bundle_names_sort_as_times_do() -> None:
    times = [datetime(2026, 12, 2, 3, 0, 0, 5, tzinfo=UTC),
             datetime(2026, 12, 2, 3, 0, 0, 40, tzinfo=UTC),
             datetime(2026, 12, 10, 1, 0, tzinfo=UTC)]
    names = [bundle_name(t) for t in times]
    assert names[0] == "20261202T030000.000005Z" and sorted(names) == names
