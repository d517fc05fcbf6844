"""Unit tests of attested_cortex.policy: no database, no server, no cluster."""
