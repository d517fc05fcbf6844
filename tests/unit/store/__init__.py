"""Unit tests of attested_cortex.store: no database, no server, no cluster."""
