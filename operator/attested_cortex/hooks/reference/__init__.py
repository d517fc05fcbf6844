"""Reference hook programs, opt-in: ``python -m attested_cortex.hooks.reference.redact`` and
``python -m attested_cortex.hooks.reference.autolink``. They are standalone programs that
speak the hook wire protocol; nothing in the server imports them."""
