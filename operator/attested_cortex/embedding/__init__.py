"""Embedders: turn memory and query text into vectors for hybrid recall.

Three sources, chosen by ``cortexctl serve --embedder`` (see :mod:`.choosing`): the embedded
default (:mod:`.default`, all-MiniLM-L6-v2 as int8 ONNX shipped inside a wheel, no network;
:mod:`.small`, a static ``wordllama`` model, the ``small`` choice),
an OpenAI-compatible endpoint (:mod:`.remote`), or vectors the client sends itself
(:mod:`.client`). Used by the service layer only; nothing here touches the database.
"""
