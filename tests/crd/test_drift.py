"""The checked-in CRDs (``crds/`` and the chart's copy) are exactly what the models render.

``make lint`` runs this file; when it fails, run ``make crds`` and commit the result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from attested_cortex.crd import rendered_files

ROOT = Path(__file__).resolve().parents[2]
COPIES = (ROOT / "crds", ROOT / "charts" / "attested-cortex" / "crds-templates")


@pytest.mark.parametrize("directory", COPIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_checked_in_crds_match_the_models(directory: Path) -> None:
    expected = rendered_files()
    present = {path.name: path.read_text(encoding="utf-8") for path in directory.glob("*.yaml")}
    assert sorted(present) == sorted(expected), f"{directory}: run `make crds`"
    stale = [name for name, text in expected.items() if present[name] != text]
    assert not stale, f"{directory}: {stale} drifted from the models; run `make crds`"
