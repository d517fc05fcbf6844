"""Root conftest: registers the fixture plugins for the real services the suite runs against.

* ``tests.support.postgres`` - a private PostgreSQL 15 cluster and PostgreSQL 17 + Apache AGE,
  with one isolated database per test.
* ``tests.support.kube`` - a real local Kubernetes control plane (etcd, kube-apiserver, ...).
* ``tests.support.realnode`` - the real one-node cluster (pods in containerd + runc), run when
  its binaries and images are built, skipped loudly otherwise.

* ``tests.support.tiers`` - marks each test ``pg``, ``kube`` or ``realnode`` by the fixtures it
  asks for, so ``make test-fast`` can select the tests that need no service.

Each service starts lazily, the first time a test asks for it, and stops at session end.
"""

pytest_plugins = ["tests.support.tiers", "tests.support.postgres", "tests.support.kube",
                  "tests.support.cortex", "tests.support.realnode"]
