"""Tests of attestation: canonical CBOR, keys, signing, levels, the signed_events chain, CLI."""
