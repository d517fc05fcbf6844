"""Background workers, the service's middle layer (ADR 0025): parts the server starts once
and closes at shutdown, which the operations consult through ``Services``.

:mod:`.embedding` (the embedder, write-behind queue and backfill for hybrid recall),
:mod:`.approving` (held AskUser actions, their stream and sweeper),
:mod:`.transcript_sweeping` (the transcript retention sweeper) and :mod:`.resealing`
(transcript frames re-sealed under the current master key version, ADR 0056). They use
the pipeline's records (:mod:`..pipeline.write_records`) and never the per-resource operations.
"""
