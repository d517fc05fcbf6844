"""store graph subpackage."""
