"""Portable, digested, signed bundles of a whole cortex: the logical backup path (issue 24).

The public surface of the package. The pure core (:mod:`.formats`, :mod:`.manifests`,
:mod:`.copytext`, :mod:`.checking`, :mod:`.tarring`) defines the bundle and decides whether
one verifies, without I/O; :mod:`.exporting` and :mod:`.importing` drive it over a database
(SQL in :mod:`attested_cortex.store.dumping`) and a directory or a stream. Called by
``cortexctl export`` / ``cortexctl import`` and ``GET /v1/export``; later by the scheduled
logical backup and the operator's verification Job (docs/backup.md, ADR 0033 and 0034).
"""

from __future__ import annotations

from attested_cortex.bundles.errors import BundleError
from attested_cortex.bundles.exporting import DirectorySink, ExportReport, export_bundle
from attested_cortex.bundles.importing import ImportReport, import_bundle

__all__ = [
    "BundleError", "DirectorySink", "ExportReport", "ImportReport", "export_bundle",
    "import_bundle",
]
