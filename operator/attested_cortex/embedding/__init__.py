"""Embedders: turn memory and query text into vectors for hybrid recall.

Three sources, chosen by ``cortexctl serve --embedder`` (see :mod:`.choosing`): the embedded
default (:mod:`.default`, a static ``wordllama`` model shipped inside its wheel, no network;
:mod:`.minilm`, all-MiniLM-L6-v2 as int8 ONNX, the ``minilm`` choice),
an OpenAI-compatible endpoint (:mod:`.remote`), or vectors the client sends itself
(:mod:`.client`). Used by the service layer only; nothing here touches the database.
"""
