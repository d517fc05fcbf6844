"""Pure builders: custom resources in, Kubernetes object dicts out (no kopf, no client, no I/O).

Called by the controllers (``attested_cortex.controller``), which gather the inputs, call a
builder and apply what it returns with server-side apply. Each module builds one object
family, as CloudNativePG's ``pkg/specs`` does; tests give a spec literal and check fields.
"""
