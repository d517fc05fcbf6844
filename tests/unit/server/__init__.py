"""Unit tests of attested_cortex.server: no database, no server, no cluster."""
