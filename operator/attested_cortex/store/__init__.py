"""The store: every SQL statement, and the only package that imports psycopg (ADR 0023).

What the service layer works through: :mod:`.database` (transaction scopes over the pool of
:mod:`.pooling`, which fails fast while the database is away and drops a session a failover
ended), :mod:`.errors` (every driver error translated into the domain tree of
:mod:`attested_cortex.errors`; nothing above sees a psycopg exception) and
:mod:`.notifications` (LISTEN/NOTIFY).

One module per table family: :mod:`.memories`, :mod:`.links`, :mod:`.embeddings`,
:mod:`.signatures`, :mod:`.transcripts`, :mod:`.approvals`, :mod:`.usage`,
:mod:`.idempotency` (keyed writes, ADR 0030), :mod:`.events` (the audit chain's rows) and
:mod:`.scanning` (the deep audit's whole-table scans); :mod:`.recall` (full-text and vector
candidates fused in one statement); :mod:`.graph` (the AGE and recursive-CTE backends).

The schema: :mod:`.schema` (the shipped migrations as a pure plan), :mod:`.migrating`
(applies it under an advisory lock), :mod:`.migrations` (the SQL files) and
:mod:`.granting` (the least-privilege role ``cortexctl migrate --app-role`` sets up).
"""
