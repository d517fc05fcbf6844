"""Translation of psycopg errors into the domain tree, for the storage layer only.

Expected database errors (a duplicate key, a broken check constraint, text PostgreSQL
cannot store, a lost connection, a table a later migration adds) become the specific
:mod:`attested_cortex.errors` class; what a failover or a restart shows a session (it was
terminated, the server is in recovery, a demoted primary refuses writes, a transaction was
aborted) is a 503 (:func:`failover_error`, ADR 0030), and :func:`ends_session` tells the pool
which connections to drop; a missing privilege becomes
:class:`~attested_cortex.errors.StoragePrivilegeError` and anything else
:class:`~attested_cortex.errors.StorageError` (a 500, logged with the driver's exception as
its cause). Every way out of the store (:class:`.database.Database`'s scopes,
:mod:`.notifications`, :func:`.database.single_connection`, :func:`.migrating.migrate`)
passes through :func:`translating`, so nothing above the store sees a psycopg exception;
the import-linter contract "psycopg only in the store" (pyproject.toml) keeps the driver
itself out of the other layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
from psycopg import errors as pg

from attested_cortex.errors import (
    ConflictError,
    CortexError,
    InvalidInputError,
    NotFoundError,
    NotReadyError,
    SchemaMissingError,
    StorageError,
    StoragePrivilegeError,
)


def translate(exc: psycopg.Error) -> CortexError | None:
    """The domain error for an expected database error, or None for a bug."""
    constraint = getattr(exc.diag, "constraint_name", None)
    if isinstance(exc, pg.UniqueViolation):
        return ConflictError("the object already exists", constraint=constraint)
    if isinstance(exc, pg.ForeignKeyViolation):
        return NotFoundError("a referenced object does not exist", constraint=constraint)
    if isinstance(exc, pg.CheckViolation | pg.NotNullViolation | pg.ExclusionViolation):
        return InvalidInputError("the value breaks a storage rule", constraint=constraint)
    if isinstance(exc, pg.DataError):
        # NUL bytes, unrepresentable characters, out-of-range numbers, bad JSON text.
        detail = exc.diag.message_primary
        return InvalidInputError(f"the database cannot store this value: {detail}")
    if isinstance(exc, pg.LockNotAvailable):
        return ConflictError("a concurrent change conflicted with this one; retry")
    failover = failover_error(exc)
    if failover is not None:
        return failover
    if isinstance(exc, pg.UndefinedTable | pg.UndefinedColumn | pg.UndefinedFunction):
        # ``migrate --target`` stopped before the migration this operation needs.
        return SchemaMissingError(
            f"the database schema lacks what this operation needs ({exc.diag.message_primary});"
            " run cortexctl migrate to bring it to this build's version"
        )
    if isinstance(exc, pg.QueryCanceled):
        # statement_timeout (store/pooling.py): the database is too slow, not unreachable
        return NotReadyError("the database did not finish within the statement timeout; "
                             "retry shortly", code="database_timeout")
    if isinstance(exc, psycopg.OperationalError):
        # "unreachable" alone hid a refused password (a data volume kept from an earlier
        # cortex): the driver's first line says which, and never holds the password.
        return NotReadyError(f"the database is unreachable ({connection_reason(exc)}); "
                             "retry shortly")
    return None


#: What a client sees of a database changing primaries (ADR 0030): 503 and Retry-After.
FAILOVER = "database_failover"


def failover_error(exc: psycopg.Error) -> NotReadyError | None:
    """The 503 of a database error a failover (or a restart) causes, else None. Nothing the
    failing statement did is kept, except a COMMIT whose answer was lost: a write retried
    with its Idempotency-Key is then answered once (ADR 0030)."""
    if isinstance(exc, pg.AdminShutdown | pg.CrashShutdown | pg.CannotConnectNow):
        # 57P01 the session was terminated (a fast or smart shutdown, a promotion that
        # ended it), 57P02 another backend crashed, 57P03 the server is starting or in recovery
        return NotReadyError("the database is restarting or changing primaries; retry "
                             "shortly", code=FAILOVER)
    if isinstance(exc, pg.ReadOnlySqlTransaction):
        # 25006: this session reached a standby, or a primary that was demoted under it
        return NotReadyError("the database is read-only here (a primary being replaced); "
                             "retry shortly", code=FAILOVER)
    if isinstance(exc, pg.SerializationFailure | pg.DeadlockDetected):
        # 40001 (also a standby's "conflict with recovery") and 40P01: the database rolled
        # the transaction back whole; sending it again is safe
        return NotReadyError("the database aborted this transaction (a serialization "
                             "failure or a deadlock); nothing was written: retry",
                             code="transaction_aborted")
    return None


def ends_session(exc: BaseException) -> bool:
    """Whether a connection that raised ``exc`` must not serve another request: it lost its
    server, or its server can no longer write (a demoted primary keeps the socket open)."""
    # A broken socket already leaves the connection unusable (pooling.reusable); these
    # leave it looking healthy, or answer on a session the server is ending.
    return isinstance(exc, pg.ReadOnlySqlTransaction | pg.AdminShutdown | pg.CrashShutdown
                      | pg.CannotConnectNow)


def domain_error(exc: psycopg.Error) -> CortexError:
    """The domain error for any database error: the expected ones by :func:`translate`, a
    missing privilege as StoragePrivilegeError, anything else as StorageError."""
    domain = translate(exc)
    if domain is not None:
        return domain
    if isinstance(exc, pg.InsufficientPrivilege):
        return StoragePrivilegeError(f"the database role lacks a privilege: "
                                     f"{exc.diag.message_primary}")
    return StorageError(reason=f"{type(exc).__name__}: {exc.diag.message_primary or exc}"[:200])


def connection_reason(exc: BaseException) -> str:
    """A one-line reason without the connection string (it may hold a password)."""
    if isinstance(exc, TimeoutError):
        return "no answer within the connect timeout"
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


@contextmanager
def translating() -> Iterator[None]:
    """Re-raise every psycopg error as a domain error (``raise ... from``)."""
    try:
        yield
    except psycopg.Error as exc:
        raise domain_error(exc) from exc
