# attested-cortex: every target does its own set-up on a fresh machine.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export ATTESTED_CORTEX_CACHE ?= $(HOME)/.cache/attested-cortex
# The Go toolchain (only needed for a cold build of the local control plane).
export PATH := $(PATH):/usr/local/go/bin
PYTEST_ARGS ?=
# make run CORTEX=ha: the cortex's database on CloudNativePG (3 instances) instead of one pod.
export CORTEX ?= managed

.PHONY: help venv deps deps-age-root deps-control-plane deps-kstatus deps-test-modules node-deps tools images node-up node-down peers test test-fast test-local run run-plan serve lint bench e2e e2e-kind crds clean

help:
	@echo "make run   - the whole system: one-node cluster, chart, examples, API URL (Ctrl-C stops it)"
	@echo "make run CORTEX=ha - the same with CloudNativePG and a 3-instance cortex, and how to watch a failover"
	@echo "make run-plan [CORTEX=ha] - what make run would build for that cortex (builds nothing)"
	@echo "make serve - the cortex server alone (PostgreSQL + AGE, no Kubernetes; Ctrl-C stops it)"
	@echo "make test  - install everything the tests need and run the whole suite"
	@echo "make test-fast - the tests that need no service and start no process (no PostgreSQL, Kubernetes or node): < 60 s"
	@echo "make test-local - test-fast and the tests that start processes of their own (cortexctl, pytest, daemons): minutes"
	@echo "make lint  - ruff, mypy (strict), import-linter, helm lint, CRD drift check"
	@echo "make bench - benchmarks; writes docs/benchmarks/*.json and docs/PERFORMANCE.md"
	@echo "make node-up - the real one-node cluster in the foreground (Ctrl-C stops and cleans up)"
	@echo "make e2e   - on the real node: helm install, examples, e2e/ (builds what it needs)"
	@echo "make e2e-kind - on a machine with Docker: kind cluster, images, helm install, e2e/"

$(BIN)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $@

venv: $(BIN)/.installed

# System packages and cached services (PostgreSQL 15, PostgreSQL 17 + AGE root, Kubernetes binaries).
# kstatus (Flux's health, for tests/gitops/test_health.py) is cheap: 140 s cold, 1 s cached.
# promtool is not (1520 s cold): `make tools` builds it; its test skips without it.
# The groups share no file, so they build at once: the Debian root (downloads and unpacking)
# and the venv overlap the Go builds (CPU), which take two thirds of a cold `make deps`.
deps:
	hack/ensure-system-packages.sh
	$(MAKE) --no-print-directory -j4 -Oline venv deps-age-root deps-control-plane deps-kstatus \
	  deps-test-modules

deps-age-root:
	hack/pg/ensure-age-root.sh

deps-control-plane:
	hack/k8s/ensure-binaries.sh

deps-kstatus:
	hack/k8s/ensure-binaries.sh kstatus

# The Go modules whose CRDs the builder tests read (CloudNativePG's, cert-manager's): seconds.
deps-test-modules: venv
	$(BIN)/python -m tests.support.gomodules

# Opt-in test tools (promtool and kstatus), built from their Go modules; and a real C2SP
# witness (torchwood's litewitness, 67 s cold) for tests/server/test_real_witness.py.
tools:
	hack/k8s/ensure-binaries.sh tools
	hack/witness/ensure-witness.sh

# Opt-in: the peer the recall benchmarks measure side by side (bench/peer.py,
# bench/longmemeval.py), ai-memory 0.10.0 from crates.io, built with the local cargo on one
# job (tens of minutes cold; cached by version under $ATTESTED_CORTEX_CACHE/peers).
peers:
	hack/peers/ensure-ai-memory.sh

# The real one-node cluster (opt-in, not part of `deps`): its Debian packages, kubelet, kube-proxy,
# CoreDNS and CloudNativePG's manager (with its release manifest), and the images built offline;
# then the previous release's image and chart from git history for e2e/test_upgrade.py
# (hack/upgrade/previous.env; 113 s cold, cached by commit).
# `make test` runs the real-node tests once these exist.
node-deps: deps
	hack/k8s/ensure-node-packages.sh
	hack/k8s/ensure-binaries.sh node
	hack/images/build.sh
	hack/upgrade/build-previous.sh

node-up: node-deps
	$(BIN)/python hack/k8s/realnode.py up

# Removes what a killed node left (processes, mounts, namespaces, veths, chains).
node-down:
	python3 hack/k8s/realnode.py down

e2e: node-deps
	e2e/realnode.sh

# The images, built offline with podman from a debootstrap of Debian trixie (seconds when current).
images:
	hack/k8s/ensure-node-packages.sh
	hack/images/build.sh

# What the machine must have, checked before anything is built (one line per missing thing).
check-%:
	@hack/check-prerequisites.sh $*

test: check-test deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The fast tier: every test that needs no service and starts no process of its own (< 60 s).
# tests/support/tiers.py marks a test pg, kube or realnode from the fixtures it asks for; a test
# that starts PostgreSQL, cortexctl or a daemon itself says so (pg, spawns), so the tiers are
# selections, not folders. The local tier adds the spawning ones: still no service (minutes).
LOCAL_TIER := not pg and not age and not kube and not realnode and not tools
FAST_TIER := $(LOCAL_TIER) and not spawns
test-fast: check-fast venv
	$(BIN)/python -m pytest -q -m "$(FAST_TIER)" $(PYTEST_ARGS)

test-local: check-fast venv
	$(BIN)/python -m pytest -q -m "$(LOCAL_TIER)" $(PYTEST_ARGS)

# The whole system on the real one-node cluster; builds what is missing of what the chosen
# example needs, and nothing else (hack/runplan.py: no kwok, no previous release; CloudNativePG
# and MinIO only for CORTEX=ha), each group saying what it is for and how long it took last
# time; then prints the kubeconfig, `kubectl get mcx`, the API URL and curl lines.
run: check-run venv
	hack/ensure-system-packages.sh
	hack/k8s/ensure-node-packages.sh
	$(BIN)/python hack/run.py --cortex $(CORTEX)

run-plan: venv
	$(BIN)/python hack/run.py --cortex $(CORTEX) --plan

# The cortex server alone on 127.0.0.1 (PostgreSQL 17 + AGE, dev auth), no Kubernetes.
serve: check-serve venv
	hack/ensure-system-packages.sh
	hack/pg/ensure-age-root.sh
	$(BIN)/python hack/serve.py

lint: venv
	$(BIN)/ruff check operator tests hack bench e2e
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q tests/crd/test_drift.py
	hack/k8s/ensure-binaries.sh helm >/dev/null && "$$(hack/k8s/ensure-binaries.sh --print-bin-dir)/helm" lint charts/attested-cortex

bench: deps
	$(BIN)/python -m bench

crds: venv
	$(BIN)/cortexctl crds --out-dir crds
	$(BIN)/cortexctl crds --out-dir charts/attested-cortex/crds-templates

e2e-kind:
	e2e/kind.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
