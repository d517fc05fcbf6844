"""The spoke-memory wire family (seed 001; docs/spoke-memory.md, ADRs 0060 and 0061).

Pure: no I/O, no database, no HTTP. The service (``service/resources/spoke/``) runs the
operations; the server's ``/v1/spoke/memory`` route decodes them through this package.

- :mod:`.models`: the thirteen wire models of the seed and the values they share.
- :mod:`.requests`: each operation's request and read answer.
- :mod:`.operations`: the 33 ``memory.*`` operations, one declared table (flag, request and
  answer types, whether it mutates and whether it may answer pending).
- :mod:`.coverage`: what a principal's grants cover, and non-amplification.
- :mod:`.reflecting`: the default reflection engine (basis, digest, extractive synthesis).
- :mod:`.schemas`: the published JSON Schemas (``python -m attested_cortex.spoke.schemas``).

The transfer format is the logical bundle's with the ``space`` kind
(:mod:`attested_cortex.bundles.spaces`, ADR 0070).
"""
