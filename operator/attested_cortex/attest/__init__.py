"""attest subpackage."""
