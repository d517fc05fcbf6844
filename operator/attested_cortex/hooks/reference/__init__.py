"""Reference hook programs, opt-in: ``python -m attested_cortex.hooks.reference.redact``,
``...autolink``, ``...rerank`` (post_recall: reorders the hits by meaning) and ``...expand``
(pre_recall: query expansion from the cortex's vocabulary; docs/adr/0071). They are
standalone programs that speak the hook wire protocol; nothing in the server imports them
(``rerank`` and ``expand`` load the embedded MiniLM model in their own process).
"""
