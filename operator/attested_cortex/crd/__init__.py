"""crd subpackage."""
