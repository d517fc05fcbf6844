"""hooks subpackage."""
