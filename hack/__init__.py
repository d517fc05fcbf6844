"""Development tooling as one importable package: the local services (hack/support/), the
local Kubernetes control plane and real node (hack/k8s/localkube/) and the ``make`` scripts.

tests/, bench/ and e2e/ import it; it imports none of them (ADR 0117, kept by an import-linter
contract in pyproject.toml).
"""
