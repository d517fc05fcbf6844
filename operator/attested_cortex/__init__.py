"""attested-cortex: a trustworthy memory substrate for fleets of AI agents.

The package is split by concern (see docs/ARCHITECTURE.md):

* ``crd`` - pydantic models of the custom resources, the single source of the CRD YAML.
* ``controller`` - kopf handlers over pure builders that turn a spec into child manifests.
* ``server`` - the aiohttp HTTP API (routes only fetch, call the service layer, and answer).
* ``service`` - one pipeline per operation: auth -> pre-hooks -> rules -> write -> sign -> audit
  -> post-hooks.
* ``store`` - schema, migrations, memories, recall and the graph backends (AGE and CTE).
* ``attest`` - Ed25519 identities, canonical CBOR and link signatures.
* ``hooks`` - the hook pipeline (exec, daemon and remote daemon transports).
* ``policy`` - permission rules and decisions.
* ``transcripts`` - zstd transcripts.
* ``cli`` - ``cortexctl``.
"""

__version__ = "0.1.0"
