"""service subpackage."""
