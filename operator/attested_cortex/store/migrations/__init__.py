"""Versioned SQL migrations, ``NNNN_name.sql``, applied in order by :mod:`..migrating`."""
