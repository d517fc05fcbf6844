#!/usr/bin/env bash
# make e2e: the end-to-end checks on the real one-node cluster of this host (no Docker).
#
# Starts the real node (hack/k8s/realnode.py up, in the background; stopped and cleaned up on
# exit), installs the chart with Helm into a namespace enforcing the restricted Pod Security
# Standard, applies the examples (examples/cortex/*.yaml) into it, prints their status, and
# runs e2e/ against it, with the cached kubectl and helm first on PATH: e2e/test_install.py
# (CRDs, operator, admission) and e2e/test_system.py (the whole system: a cortex with a managed
# database, identities, a hook chain and rules; stores, recalls, hooks, rules and signed links
# through a port-forward; server and database pod deletions; helm upgrade, then uninstall).
# `make test` runs the same e2e/ tests on the session's real node (no E2E_NAMESPACE).
# Environment: NAMESPACE (release namespace), KEEP=1 keeps the node running at the end
# (stop it with Ctrl-C in the printed command's terminal, or hack/k8s/realnode.py down).
set -euo pipefail
cd "$(dirname "$0")/.."

NAMESPACE=${NAMESPACE:-attested-cortex-system}
bin_dir="$(hack/k8s/ensure-binaries.sh --print-bin-dir)"
export PATH="$bin_dir:$PATH"
export HELM_CACHE_HOME HELM_CONFIG_HOME HELM_DATA_HOME
work="$(mktemp -d)"
HELM_CACHE_HOME="$work/helm-cache" HELM_CONFIG_HOME="$work/helm-config" HELM_DATA_HOME="$work/helm-data"

log="$work/realnode.log"
python3 hack/k8s/realnode.py up >"$log" 2>&1 &
node_pid=$!
stop_node() {
  if [ "${KEEP:-0}" = 1 ]; then
    echo "e2e: node kept running (pid $node_pid); stop it with: kill $node_pid" >&2
    return
  fi
  kill -TERM "$node_pid" 2>/dev/null || true
  wait "$node_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap stop_node EXIT

for _ in $(seq 300); do  # bounded: a cold start imports the images (about a minute)
  grep -q '^kubeconfig:' "$log" && break
  kill -0 "$node_pid" 2>/dev/null || { cat "$log" >&2; echo "e2e: the real node did not start" >&2; exit 1; }
  sleep 1
done
grep -q '^kubeconfig:' "$log" || { cat "$log" >&2; echo "e2e: the real node did not start in 300 s" >&2; exit 1; }
grep '^started in' "$log" >&2 || true
export KUBECONFIG
KUBECONFIG="$(sed -n 's/^kubeconfig: //p' "$log")"

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=restricted
helm upgrade --install attested-cortex charts/attested-cortex --namespace "$NAMESPACE" \
  --set image.pullPolicy=IfNotPresent --wait --timeout 3m

if compgen -G "examples/cortex/*.yaml" >/dev/null; then
  kubectl apply -n "$NAMESPACE" -f examples/cortex/
  # Reported, not asserted: the flows' checks are e2e/test_system.py's (on its own cortex).
  kubectl wait -n "$NAMESPACE" --for=condition=Ready mcx --all --timeout="${E2E_READY_TIMEOUT:-180s}" \
    || echo "e2e: the examples' MemoryCortex is not Ready (yet)" >&2
  kubectl get -n "$NAMESPACE" mcx,agentidentities,hookchains,permissionrules,pods,pvc -o wide >&2 || true
else
  echo "e2e: no examples/cortex/*.yaml; nothing applied" >&2
fi

test -x .venv/bin/python || make venv
E2E_NAMESPACE="$NAMESPACE" .venv/bin/python -m pytest e2e -q -p no:cacheprovider
