"""Unit tests of attested_cortex.controller: no database, no server, no cluster."""
