"""The operator's idea of the newest schema is the migrator's."""

from attested_cortex.controller.versions import newest_schema_version
from attested_cortex.store.schema import MAX_SUPPORTED_SCHEMA


def test_operator_and_migrator_agree_on_the_newest_schema() -> None:
    assert newest_schema_version() == MAX_SUPPORTED_SCHEMA >= 4
