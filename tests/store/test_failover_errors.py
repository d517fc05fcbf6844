"""What a session sees of a failover, classified (ADR 0030): every error a restart, a
promotion or a demoted primary raises is a retryable 503, and the ones that leave a
connection looking healthy make the pool drop it. The real errors on real servers:
tests/server/test_failover.py."""

import psycopg
import pytest
from psycopg import errors as pg

from attested_cortex.errors import ConflictError, NotReadyError
from attested_cortex.store.errors import domain_error, ends_session


@pytest.mark.parametrize(("error", "code", "dropped"), [
    (pg.AdminShutdown, "database_failover", True),  # 57P01: the session was terminated
    (pg.CrashShutdown, "database_failover", True),  # 57P02: another backend crashed
    (pg.CannotConnectNow, "database_failover", True),  # 57P03: starting up, in recovery
    (pg.ReadOnlySqlTransaction, "database_failover", True),  # 25006: a demoted primary
    (pg.SerializationFailure, "transaction_aborted", False),  # 40001, conflict with recovery
    (pg.DeadlockDetected, "transaction_aborted", False),  # 40P01
    (psycopg.OperationalError, "not_ready", False),  # the socket: dropped as broken anyway
    (pg.QueryCanceled, "database_timeout", False),
])
def test_failover_errors_are_retryable_503s(error: type[psycopg.Error], code: str,
                                            dropped: bool) -> None:
    domain = domain_error(error("from the server"))
    assert isinstance(domain, NotReadyError) and domain.http_status == 503
    assert domain.code == code
    assert ends_session(error("from the server")) is dropped


def test_a_held_lock_stays_a_409() -> None:
    domain = domain_error(pg.LockNotAvailable("lock timeout"))
    assert isinstance(domain, ConflictError) and domain.http_status == 409
    assert not ends_session(pg.LockNotAvailable("lock timeout"))
