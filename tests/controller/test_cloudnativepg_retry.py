"""How soon a cortex looks for CloudNativePG again: soon after it went missing, then at most
once a minute (controller/memorycortex/cloudnativepg.missing_retry)."""

from __future__ import annotations

import pytest

from attested_cortex.controller.memorycortex.cloudnativepg import missing_retry


@pytest.mark.parametrize(("missing_for", "retry"), [(0, 5.0), (10, 5.0), (40, 10.0),
                                                    (200, 50.0), (240, 60.0), (86400, 60.0)])
def test_backoff_grows_with_the_wait_and_is_capped(missing_for: float, retry: float) -> None:
    assert missing_retry(missing_for) == retry
