#!/usr/bin/env bash
# Builds, once, the real binaries of the local Kubernetes control plane and caches them by version.
#
# Callers: the Makefile (`deps`, `lint`), tests/support/kube.py (its failure message names this
# script), hack/k8s/controlplane.py, CI. Versions come from hack/k8s/versions.env.
#
# Usage: hack/k8s/ensure-binaries.sh [--print-bin-dir | --missing] [component|node...]
#   --missing prints the named components (default: the control plane) not built yet, one a line,
#   and builds nothing (hack/check-prerequisites.sh asks it whether Go will be needed).
#   components: etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok helm
#   (none given = all of these), and the real node's kubelet kube-proxy coredns crictl and
#   cnpg (CloudNativePG's manager, plus its release manifest beside it as
#   cnpg-<version>.yaml) and minio (the S3-compatible object store of the backup tests, ADR
#   0037), built only when named (`node` names all six); and the opt-in test
#   tools promtool (cmd/promtool of github.com/prometheus/prometheus) and kstatus
#   (hack/kstatus: sigs.k8s.io/cli-utils' pkg/kstatus behind a stdin/stdout main), built only
#   when named (`tools` names both; they take a lock of their own, so they build while the
#   control plane does). Groups, named as components are (make run builds only the groups its
#   example needs: hack/runplan.py): `control-plane` (etcd, the kube-* servers, kubectl, helm;
#   no kwok), `node-base` (kubelet kube-proxy coredns crictl), `node` (node-base, cnpg, minio),
#   `tools`. Each build records its seconds and prints "last time N s". Idempotent and
#   flock-protected; a component whose stamp matches its version is skipped. Everything is built from source with the local Go toolchain through
#   generated wrapper modules under $ATTESTED_CORTEX_CACHE/k8s/<version>/src; nothing in the
#   repository is written.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache_root="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}/k8s/$KUBERNETES_VERSION"
bin_dir="$cache_root/bin"
src_dir="$cache_root/src"
# Never download a toolchain: build with the Go on PATH (etcd v3.5.35 needs Go >= 1.26).
export GOTOOLCHAIN=local
kube_components=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
all_components=(etcd "${kube_components[@]}" kwok helm)
# The real one-node cluster (hack/k8s/localkube/realnode.py); `make test` does not build these.
node_base=(kubelet kube-proxy coredns crictl)
node_components=("${node_base[@]}" cnpg minio)
# What the real node's own control plane runs (it needs no kwok: that is the simulated node's).
control_plane=(etcd "${kube_components[@]}" helm)
# Test tools, opt-in: tests that need them skip with the command that builds them.
tool_components=(promtool kstatus)

die() { echo "ensure-binaries: $*" >&2; exit 1; }
log() { echo "ensure-binaries: $*" >&2; }

version_of() {
  case "$1" in
    etcd) echo "$ETCD_VERSION" ;;
    kwok) echo "$KWOK_VERSION" ;;
    helm) echo "$HELM_VERSION" ;;
    coredns) echo "$COREDNS_VERSION" ;;
    crictl) echo "$CRICTL_VERSION" ;;
    cnpg) echo "$CNPG_VERSION" ;;
    promtool) echo "$PROMETHEUS_VERSION" ;;
    kstatus) echo "$CLI_UTILS_VERSION-$(sha256sum "$here/../kstatus/main.go" "$here/../kstatus/go.mod" | sha256sum | cut -c1-12)" ;;
    minio) echo "$MINIO_VERSION" ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy)
      echo "$KUBERNETES_VERSION" ;;
    *) die "unknown component '$1' (known: ${all_components[*]} ${node_components[*]} ${tool_components[*]})" ;;
  esac
}

last_time() {  # " (last time N s)" when a build of $1 was timed before (any version)
  local seconds; seconds="$(cat "$bin_dir/.$1.seconds" 2>/dev/null || true)"
  [[ -n "$seconds" ]] && echo " (last time ${seconds} s)" || echo " (first time: minutes)"
}

is_built() {  # a binary counts as built when its stamp names the pinned version
  local stamp="$bin_dir/.$1.version"
  [[ -x "$bin_dir/$1" && -f "$stamp" && "$(cat "$stamp")" == "$(version_of "$1")" ]]
}

mark_built() { version_of "$1" >"$bin_dir/.$1.version"; }


# Creates a wrapper module in $1 requiring module $2 at version $3 (fresh each time: cheap).
wrapper_module() {
  local dir="$1" module="$2" version="$3"
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$dir" && go mod init attested-cortex.local/build >/dev/null 2>&1 \
    && go mod edit -require="$module@$version")
}

go_build() {  # go_build DIR LDFLAGS PKG...: builds into $bin_dir, resolving go.sum on the fly
  local dir="$1" ldflags="$2"; shift 2
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=mod \
    go build -trimpath -ldflags "-s -w $ldflags" -o "$bin_dir/" "$@")
}

module_dir() { (cd "$1" && go mod download -json "$2@$3" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])'); }

build_kubernetes() {  # builds the requested kube-* / kubectl binaries in one go build
  local dir="$src_dir/kubernetes" minor="${KUBERNETES_VERSION#v1.}"; minor="${minor%%.*}"
  wrapper_module "$dir" k8s.io/kubernetes "$KUBERNETES_VERSION"
  local k8s_dir staging_version="v0.${KUBERNETES_VERSION#v1.}"
  k8s_dir="$(module_dir "$dir" k8s.io/kubernetes "$KUBERNETES_VERSION")"
  # k8s.io/kubernetes replaces each staging module with ./staging/src/...; use the published ones.
  local staging
  for staging in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*#\1#p' "$k8s_dir/go.mod"); do
    (cd "$dir" && go mod edit -replace="$staging=$staging@$staging_version")
  done
  local date; date="$(date -u -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}" +%Y-%m-%dT%H:%M:%SZ)"
  local flags="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date -X $pkg.gitCommit=${KUBERNETES_GIT_COMMIT:-}"
  done
  local pkgs=() c
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go_build "$dir" "$flags" "${pkgs[@]}"
}

build_etcd() {
  local dir="$src_dir/etcd"
  wrapper_module "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  go_build "$dir" "" go.etcd.io/etcd/server/v3
  mv "$bin_dir/server" "$bin_dir/etcd"  # go names the binary after the path without /v3
}

build_kwok() {
  local dir="$src_dir/kwok"
  wrapper_module "$dir" sigs.k8s.io/kwok "$KWOK_VERSION"
  go_build "$dir" "-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}" sigs.k8s.io/kwok/cmd/kwok
}

build_helm() {
  local dir="$src_dir/helm" client_go minor flags pkg
  wrapper_module "$dir" helm.sh/helm/v3 "$HELM_VERSION"
  # As helm's Makefile does: the Kubernetes version helm assumes offline (`helm template`
  # capabilities, `helm lint` deprecations) follows the client-go it is built with.
  client_go="$(cd "$dir" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/client-go)"
  minor="${client_go#v0.}"; minor="${minor%%.*}"
  flags="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    flags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$minor"
  done
  go_build "$dir" "$flags" helm.sh/helm/v3/cmd/helm
}

build_coredns() {
  local dir="$src_dir/coredns"
  wrapper_module "$dir" github.com/coredns/coredns "$COREDNS_VERSION"
  go_build "$dir" "-X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" \
    github.com/coredns/coredns
}

build_crictl() {  # the CRI client the real node's stop uses to tear pod sandboxes down
  local dir="$src_dir/crictl"
  wrapper_module "$dir" sigs.k8s.io/cri-tools "$CRICTL_VERSION"
  go_build "$dir" "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    sigs.k8s.io/cri-tools/cmd/crictl
}

build_cnpg() {
  # CloudNativePG's manager, static as its release image has it (one binary: the operator, and
  # the instance manager its bootstrap init container copies into every postgres pod), with
  # the ldflags of its .goreleaser.yml; the release manifest of the same module is kept beside
  # it, for hack/cnpg/manifest.py to point at our images.
  local dir="$src_dir/cnpg" pkg=github.com/cloudnative-pg/cloudnative-pg flags module
  wrapper_module "$dir" "$pkg" "$CNPG_VERSION"
  module="$(module_dir "$dir" "$pkg" "$CNPG_VERSION")"
  flags="-X $pkg/pkg/versions.buildVersion=${CNPG_VERSION#v}"
  flags+=" -X $pkg/pkg/versions.buildCommit=${CNPG_VERSION} -X $pkg/pkg/versions.buildDate=unknown"
  go_build "$dir" "$flags" "$pkg/cmd/manager"
  mv "$bin_dir/manager" "$bin_dir/cnpg"
  install -m 0644 "$module/releases/cnpg-${CNPG_VERSION#v}.yaml" "$bin_dir/cnpg-${CNPG_VERSION#v}.yaml"
}

build_promtool() {  # Prometheus' rule checker and rule unit tester, as its Makefile builds it
  local dir="$src_dir/promtool" pkg=github.com/prometheus/prometheus flags
  wrapper_module "$dir" "$pkg" "$PROMETHEUS_VERSION"
  flags="-X github.com/prometheus/common/version.Version=${PROMETHEUS_VERSION#v}"
  go_build "$dir" "$flags" "$pkg/cmd/promtool"
}

build_kstatus() {  # hack/kstatus, its go.mod pinning cli-utils; built out of a copy
  local dir="$src_dir/kstatus"
  rm -rf "$dir" && mkdir -p "$dir"
  cp "$here/../kstatus/main.go" "$here/../kstatus/go.mod" "$dir/"
  go_build "$dir" "" .
}

build_minio() {
  # MinIO's server, unmodified (AGPL-3.0: a test/dev fixture, never in the chart; ADR 0037),
  # with the version variables its buildscripts/gen-ldflags.go sets, read from the pseudo-
  # version (v0.0.0-<UTC date>-<12-hex commit>) so `minio --version` names the commit.
  local dir="$src_dir/minio" pkg=github.com/minio/minio flags stamp commit
  wrapper_module "$dir" "$pkg" "$MINIO_VERSION"
  stamp="${MINIO_VERSION#v0.0.0-}"; commit="${stamp#*-}"; stamp="${stamp%%-*}"
  stamp="${stamp:0:4}-${stamp:4:2}-${stamp:6:2}T${stamp:8:2}:${stamp:10:2}:${stamp:12:2}Z"
  flags="-X $pkg/cmd.Version=$stamp -X $pkg/cmd.CopyrightYear=${stamp:0:4}"
  flags+=" -X $pkg/cmd.ReleaseTag=DEVELOPMENT.${stamp//:/-} -X $pkg/cmd.CommitID=$commit"
  flags+=" -X $pkg/cmd.ShortCommitID=${commit:0:12}"
  go_build "$dir" "$flags" "$pkg"
}

build() {  # build COMPONENT...: only those not yet built
  local wanted=() kube=() c
  for c in "$@"; do
    version_of "$c" >/dev/null
    if is_built "$c"; then log "$c $(version_of "$c") already built$(last_time "$c")"
    else wanted+=("$c"); fi
  done
  [[ ${#wanted[@]} -eq 0 ]] && return 0
  command -v go >/dev/null || die "Go toolchain not found; install Go (see docs/testing-kubernetes.md)"
  for c in "${wanted[@]}"; do
    local start=$SECONDS
    log "building $c $(version_of "$c")$(last_time "$c")"
    case "$c" in
      kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet|kube-proxy)
        kube+=("$c"); continue ;;
      etcd) build_etcd ;; kwok) build_kwok ;; helm) build_helm ;;
      coredns) build_coredns ;; crictl) build_crictl ;; cnpg) build_cnpg ;;
      promtool) build_promtool ;; kstatus) build_kstatus ;;
      minio) build_minio ;;
    esac
    mark_built "$c"; echo $((SECONDS - start)) >"$bin_dir/.$c.seconds"
    log "built $c $(version_of "$c") in $((SECONDS - start))s"
  done
  if [[ ${#kube[@]} -gt 0 ]]; then
    local start=$SECONDS
    build_kubernetes "${kube[@]}"
    for c in "${kube[@]}"; do mark_built "$c"; echo $((SECONDS - start)) >"$bin_dir/.$c.seconds"; done
    log "built ${kube[*]} $KUBERNETES_VERSION in $((SECONDS - start))s"
  fi
}

main() {
  local components=() only_missing=""
  for arg in "$@"; do
    case "$arg" in
      --print-bin-dir) echo "$bin_dir"; return 0 ;;
      --missing) only_missing=1 ;;
      -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1' "${BASH_SOURCE[0]}"; return 0 ;;
      -*) die "unknown option '$arg'" ;;
      node) components+=("${node_components[@]}") ;;
      node-base) components+=("${node_base[@]}") ;;
      control-plane) components+=("${control_plane[@]}") ;;
      tools) components+=("${tool_components[@]}") ;;
      *) components+=("$arg") ;;
    esac
  done
  [[ ${#components[@]} -eq 0 ]] && components=("${all_components[@]}")
  if [[ -n "$only_missing" ]]; then  # names what a build would make, builds nothing
    for c in "${components[@]}"; do is_built "$c" || echo "$c"; done
    return 0
  fi
  mkdir -p "$bin_dir" "$src_dir"
  # The test tools share no file with the control plane's build: they lock apart.
  local lock=.lock c
  for c in "${components[@]}"; do
    [[ " ${tool_components[*]} " == *" $c "* ]] || { lock=.lock; break; }
    lock=.tools.lock
  done
  exec 9>"$cache_root/$lock"
  flock 9
  build "${components[@]}"
}

main "$@"
