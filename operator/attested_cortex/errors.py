"""The one exception tree of the domain, shared by every layer.

Storage, policy, hooks, attestation and the service layer raise these; the HTTP layer maps
each class to a status code and the JSON error envelope, and the CLI to an exit message.
psycopg and aiohttp exceptions never travel past the layer that owns them: they are
translated into this tree with ``raise ... from`` (the store translates every driver error
it raises, an unexpected one into :class:`StorageError`).

::

    CortexError                      (500 only for genuine bugs: never for bad input)
    ├── InvalidInputError            400  the request is malformed or breaks a rule
    ├── UnauthenticatedError         401  missing or bad credentials
    ├── DeniedError                  403  a rule or hook denied the operation
    ├── NotFoundError                404
    ├── BodyTimeoutError             408  the client sent its body too slowly
    ├── ConflictError                409  duplicate, replay, or a concurrent change
    ├── TooLargeError                413
    ├── UnsupportedMediaTypeError    415  the body is not declared as JSON
    ├── QuotaExceededError           429  carries retry_after seconds
    ├── TooManySessionsError         429  an agent's MCP sessions are all open
    ├── NotServedError               501  a declared operation this build does not serve yet
    ├── HeldForApprovalError         202  AskUser: the operation waits for an approval id
    ├── NotReadyError                503  Retry-After; nothing was written unless a keyed
    │                                     write's answer was lost (ADR 0030). Codes:
    │                                     not_ready (unreachable), database_failover (a
    │                                     restart or a primary change), transaction_aborted
    │                                     (serialization failure, deadlock),
    │                                     database_timeout (statement timeout)
    ├── StorageError                 500  an unexpected database error (a bug, a lost grant)
    │   └── StoragePrivilegeError         the database role lacks a privilege
    └── SchemaError                  the database schema cannot be used by this build
        ├── SchemaTooNewError
        ├── MigrationChecksumError
        ├── MigrationRecordError     schema_migrations edited, or a migration failed
        └── SchemaMissingError       a feature's tables are not migrated yet (503)
"""

from __future__ import annotations

from typing import Any


class CortexError(Exception):
    """Base of every error the product raises on purpose.

    ``code`` is a stable machine-readable string, ``message`` says what happened and what
    the caller can do about it, ``details`` carries structured context (field names, ids).
    """

    code: str = "internal"
    http_status: int = 500

    def __init__(self, message: str, *, code: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.details: dict[str, Any] = details


class InvalidInputError(CortexError):
    """The input is malformed or breaks a documented rule; ``details['field']`` names it."""

    code = "invalid_input"
    http_status = 400


class UnauthenticatedError(CortexError):
    """Credentials are missing or not recognised."""

    code = "unauthenticated"
    http_status = 401


class DeniedError(CortexError):
    """A permission rule or a hook denied the operation; details carry the decision."""

    code = "denied"
    http_status = 403


class NotFoundError(CortexError):
    """The addressed object does not exist (or is not visible to the caller)."""

    code = "not_found"
    http_status = 404


class ConflictError(CortexError):
    """The operation conflicts with existing state: duplicate, replay, concurrent change."""

    code = "conflict"
    http_status = 409


class BodyTimeoutError(CortexError):
    """The request body did not arrive within ``limits.body_read_timeout_s``: a client that
    trickles its body must not hold a handler (and its memory) for ever."""

    code = "body_timeout"
    http_status = 408


class TooLargeError(CortexError):
    """The request body or a field is larger than the configured limit."""

    code = "too_large"
    http_status = 413


class UnsupportedMediaTypeError(CortexError):
    """The body's Content-Type is not JSON (UTF-8); resend it as ``application/json``."""

    code = "unsupported_media_type"
    http_status = 415


class QuotaExceededError(CortexError):
    """The agent exhausted a quota; retry after ``retry_after`` seconds."""

    code = "quota_exceeded"
    http_status = 429

    def __init__(self, message: str, *, retry_after: int, **details: Any) -> None:
        super().__init__(message, retry_after=retry_after, **details)
        self.retry_after = retry_after


class TooManySessionsError(CortexError):
    """The agent holds as many open MCP sessions as one agent may; end one (DELETE /mcp)
    or use the per-request protocol version, which opens none."""

    code = "too_many_sessions"
    http_status = 429


class NotServedError(CortexError):
    """A declared operation (a spoke-memory op of a served flag) with no handler yet."""

    code = "not_served"
    http_status = 501


class HeldForApprovalError(CortexError):
    """AskUser: the operation is held until a human decides; carries the approval id."""

    code = "held_for_approval"
    http_status = 202

    def __init__(self, message: str, *, approval_id: str, **details: Any) -> None:
        super().__init__(message, approval_id=approval_id, **details)
        self.approval_id = approval_id


class NotReadyError(CortexError):
    """The service cannot answer now (database unreachable, schema not current)."""

    code = "not_ready"
    http_status = 503


class StorageError(CortexError):
    """A database error the store does not expect: a bug, or the database changed under the
    server (a revoked grant). Answered 500 without internals and logged with its cause
    (``__cause__`` holds the driver's exception); callers above the store catch this, never
    a driver exception."""

    code = "internal"
    http_status = 500

    def __init__(self, message: str = "internal error; see the server log", *,
                 reason: str = "", **details: Any) -> None:
        super().__init__(message, **details)
        #: The database's one-line reason, for operators only (never in an API answer).
        self.reason = reason


def operator_message(exc: CortexError) -> str:
    """``exc``'s message for an operator's terminal (``cortexctl``): an unexpected database
    error names the database's reason there, which no API client is ever shown."""
    if isinstance(exc, StorageError) and exc.reason:
        return f"unexpected database error: {exc.reason}"
    return exc.message


class StoragePrivilegeError(StorageError):
    """The database role lacks a privilege the statement needs (an index on a table it does
    not own, a grant revoked by hand)."""


class SchemaError(CortexError):
    """The database schema cannot be used by this build."""

    code = "schema_error"
    http_status = 503


class SchemaTooNewError(SchemaError):
    """The database was migrated by a newer build than this one supports."""

    code = "schema_too_new"


class MigrationChecksumError(SchemaError):
    """An applied migration's checksum differs from the one this build ships."""

    code = "migration_checksum_mismatch"


class MigrationRecordError(SchemaError):
    """``schema_migrations`` disagrees with the schema (edited by hand), or applying a
    migration failed; the message names the version."""

    code = "migration_failed"


class SchemaMissingError(SchemaError):
    """The operation needs tables or columns a later migration adds (``migrate --target``
    stopped short of them); ``cortexctl migrate`` brings them."""

    code = "schema_missing"
