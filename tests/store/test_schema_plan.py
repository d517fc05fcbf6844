"""The migration plan: order, targets, and the refusals that protect a database."""

import pytest

from attested_cortex.errors import InvalidInputError, MigrationChecksumError, SchemaTooNewError
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA, MIGRATIONS, plan


def test_fresh_database_applies_everything_in_order() -> None:
    result = plan({})
    assert [m.version for m in result.pending] == sorted(m.version for m in MIGRATIONS)
    assert result.current == 0 and result.target == MAX_SUPPORTED_SCHEMA


def test_up_to_date_database_plans_nothing() -> None:
    assert plan({m.version: m.checksum for m in MIGRATIONS}).pending == ()


def test_target_stops_early() -> None:
    assert [m.version for m in plan({}, target=1).pending] == [1]


@pytest.mark.parametrize("target", [-1, MAX_SUPPORTED_SCHEMA + 1])
def test_target_out_of_range(target: int) -> None:
    with pytest.raises(InvalidInputError, match="--target"):
        plan({}, target=target)


def test_newer_database_is_refused() -> None:
    with pytest.raises(SchemaTooNewError, match="newer than this build supports"):
        plan({MAX_SUPPORTED_SCHEMA + 1: "x"})


def test_changed_migration_is_refused() -> None:
    with pytest.raises(MigrationChecksumError, match="0001_memories was changed"):
        plan({1: "0" * 64})
