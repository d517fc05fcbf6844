"""Transcripts: the conversation or reasoning trails memories come from (issue 16).

Pure functions only: :mod:`.framing` (zstd level 3 frames, bounded decompression),
:mod:`.spans` (citation spans checked and cut), :mod:`.retention` (which namespaces accept
transcripts, how long they keep them, and when one is archived or pruned). The service layer
(:mod:`attested_cortex.service.resources.transcripts`) and the sweeper call them; design in
``docs/adr/0013-transcripts-storage-and-retention.md``.
"""
