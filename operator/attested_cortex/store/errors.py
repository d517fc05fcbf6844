"""Translation of psycopg errors into the domain tree, for the storage layer only.

Expected database errors (a duplicate key, a broken check constraint, text PostgreSQL
cannot store, a lost connection, a table a later migration adds) become the specific
:mod:`attested_cortex.errors` class; a missing privilege becomes
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
    if isinstance(exc, pg.SerializationFailure | pg.DeadlockDetected | pg.LockNotAvailable):
        return ConflictError("a concurrent change conflicted with this one; retry")
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
