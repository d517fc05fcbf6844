"""The operation pipeline, the service's lowest layer (ADR 0025).

:mod:`.running` runs every operation's steps in order; :mod:`.calls` (the request values),
:mod:`.operations` (the table of operations), :mod:`.context` (the caller, the policy and
the frozen :class:`~.context.Services`), :mod:`.limits` (the enforced sizes); the steps:
:mod:`.deciding` (scope, rules, read isolation), :mod:`.hook_steps` and :mod:`.hooking`
(pre-/post- hooks, a Modify taken back), :mod:`.usage` (the storage quota),
:mod:`.settling` (approval and cap settled in the write's transaction), :mod:`.attesting`
(signatures), :mod:`.recording` and :mod:`.write_records` (the audit step and each write's
chain record). Imports nothing from :mod:`..resources` or :mod:`..workers`.
"""
