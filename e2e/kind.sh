#!/usr/bin/env bash
# make e2e-kind: for machines with Docker. Creates (or reuses) a kind cluster, builds both
# images, loads them into the cluster, installs the chart with Helm, and runs e2e/.
# Environment: CLUSTER (kind cluster name), TAG (image tag), KEEP=1 keeps the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

CLUSTER=${CLUSTER:-attested-cortex-e2e}
TAG=${TAG:-e2e}
NAMESPACE=${NAMESPACE:-attested-cortex-system}
CORTEX_IMAGE="attested-cortex/cortex:${TAG}"
POSTGRES_IMAGE="attested-cortex/postgres-age:${TAG}"

for tool in docker kind helm kubectl; do
  command -v "$tool" >/dev/null || { echo "make e2e-kind needs '$tool' on PATH" >&2; exit 1; }
done
docker info >/dev/null 2>&1 || { echo "make e2e-kind needs a running Docker engine" >&2; exit 1; }

if ! kind get clusters | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --wait 180s
fi
if [ "${KEEP:-0}" != 1 ]; then
  trap 'kind delete cluster --name "$CLUSTER"' EXIT
fi
export KUBECONFIG
KUBECONFIG=$(mktemp)
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG"

docker build -t "$CORTEX_IMAGE" -f images/cortex/Dockerfile .
docker build -t "$POSTGRES_IMAGE" images/postgres-age
kind load docker-image --name "$CLUSTER" "$CORTEX_IMAGE" "$POSTGRES_IMAGE"

kubectl create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl apply -f -
kubectl label namespace "$NAMESPACE" --overwrite pod-security.kubernetes.io/enforce=restricted
helm upgrade --install attested-cortex charts/attested-cortex \
  --namespace "$NAMESPACE" \
  --set image.repository=attested-cortex/cortex --set image.tag="$TAG" \
  --set operator.defaults.postgresImage="$POSTGRES_IMAGE" \
  --wait --timeout 5m

test -x .venv/bin/python || make venv
E2E_NAMESPACE="$NAMESPACE" .venv/bin/python -m pytest e2e -q -p no:cacheprovider
