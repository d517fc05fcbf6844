"""Hook transports: exec, daemon and remote. Siblings that never import each other."""
