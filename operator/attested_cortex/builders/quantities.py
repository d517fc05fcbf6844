"""Kubernetes storage quantities (``100Mi``, ``1.5G``) as byte counts, for the settings the
server takes in bytes. Called by :mod:`.settings` and :mod:`.storage`. Pure.
"""

from __future__ import annotations

import re
from typing import Final

MIB: Final = 1024 * 1024
UNITS: Final = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4, "P": 1000**5,
                "E": 1000**6, "Ki": 1024, "Mi": MIB, "Gi": 1024**3, "Ti": 1024**4,
                "Pi": 1024**5, "Ei": 1024**6}


def quantity_bytes(quantity: str) -> int:
    """A storage quantity (pattern-checked by the CRD) in bytes."""
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)([A-Za-z]*)", quantity)
    if match is None or match.group(2) not in UNITS:
        raise ValueError(f"not a storage quantity: {quantity!r}")
    return int(float(match.group(1)) * UNITS[match.group(2)])
