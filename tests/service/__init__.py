"""Unit tests of attested_cortex.service: no database, no server, no cluster."""
