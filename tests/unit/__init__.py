"""Unit tests: no database, no server, no cluster; one folder per package of attested_cortex
(tests of its top-level modules stay here)."""
