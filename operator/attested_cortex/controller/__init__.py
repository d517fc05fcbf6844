"""controller subpackage."""
