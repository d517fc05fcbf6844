"""The operator: kopf watches feeding one work queue, and a reconciler per kind.

Start-up: :mod:`.running` (``cortexctl operator``: kopf, health, metrics) and
:mod:`.registry` (the watches and indices derived from :data:`attested_cortex.crd.KINDS`,
the controllers listed once in ``CONTROLLERS``, :func:`~.registry.dispatch`), with kopf's
login in :mod:`.login` and the work queue (settle window, backoff) in :mod:`.queueing`.

What every reconciler is handed, :class:`~.runtime.Runtime`: the views (kopf's indices), the
:class:`~.applying.Writer` (server-side apply with one field manager; the API server's
:class:`~.applying.ApiWriter`, or the in-memory one of the fast tests, ADR 0027), the queue
and the operator-wide defaults.

One package per kind, each exporting ``KIND`` and ``reconcile``: :mod:`.memorycortex`
(database, schema, server, readiness), :mod:`.agentidentity` (key Secrets and rotation),
:mod:`.hookchain` and :mod:`.permissionrule` (satellites of a cortex, opened alike by
:mod:`.opening`). Reporting: :mod:`.statuses` (conditions written only when changed),
:mod:`.eventing` (Events on transitions), :mod:`.metrics`; :mod:`.versions` (the newest schema
this build ships). Objects themselves are built by the pure :mod:`attested_cortex.builders`.
"""
