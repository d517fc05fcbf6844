"""The local Kubernetes control plane and real node (localkube/) and their launchers."""
