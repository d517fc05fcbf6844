#!/usr/bin/env bash
# Builds, offline and once per commit, the previous release that e2e/test_upgrade.py upgrades
# from: the cortex image (operator, server, migrate, hookd) and the chart of PREVIOUS_COMMIT
# (hack/upgrade/previous.env), taken from git history.
#
# Callers: `make upgrade-deps` (opt-in, like ensure-binaries.sh's groups), the real-node gate
# (tests/support/previous.py names this script when the test skips), a person.
#
# Usage: hack/upgrade/build-previous.sh [--print-dir]
#
# The commit's tree comes out with `git archive` (no worktree registered in the shared
# repository); its images/cortex/Dockerfile is built with podman on hack/images/build.sh's
# private store and Python base image (so build.sh must have run once), tagged
# docker.io/attested-cortex/cortex:previous-<12 hex> (never the current appVersion's tag), and
# saved as a docker archive the test imports into the node's containerd. Output, cached by
# commit under <cache>/upgrade/<commit>/: cortex.tar, cortex.ref, chart/ (the old chart).
# A second run only checks that the output exists. Prints "last time N s".
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=previous.env
. "$here/previous.env"
root="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}"
images="$root/images"
store="$images/podman"
dir="$root/upgrade/$PREVIOUS_COMMIT"
readonly PYTHON_IMAGE=localhost/attested-cortex/python:3.13-trixie
readonly REF="docker.io/attested-cortex/cortex:previous-${PREVIOUS_COMMIT:0:12}"

die() { echo "upgrade: $*" >&2; exit 1; }
log() { echo "upgrade: $*" >&2; }

pm() {  # podman on build.sh's private store
  podman --root "$store/root" --runroot "$store/run" --storage-driver overlay \
    --cgroup-manager cgroupfs --events-backend file "$@"
}

case "${1:-}" in
  --print-dir) echo "$dir"; exit 0 ;;
  "") ;;
  *) die "usage: $0 [--print-dir]" ;;
esac
if [ -f "$dir/cortex.tar" ] && [ -f "$dir/cortex.ref" ] && [ -f "$dir/chart/Chart.yaml" ]; then
  log "previous release ${PREVIOUS_COMMIT:0:12} already built in $dir"; exit 0
fi
[ "$(id -u)" = 0 ] || die "must run as root (podman's store)"
command -v podman >/dev/null || die "podman is missing; run hack/k8s/ensure-node-packages.sh"
git -C "$repo" cat-file -e "$PREVIOUS_COMMIT^{commit}" 2>/dev/null \
  || die "commit $PREVIOUS_COMMIT is not in this repository's history"
mkdir -p "$dir" "$root/upgrade"
exec 9>"$images/.lock"  # build.sh's lock: one user of the store at a time
flock -w 3600 9 || die "timed out waiting for another image build (lock $images/.lock)"
pm image exists "$PYTHON_IMAGE" || die "no $PYTHON_IMAGE yet: run hack/images/build.sh first"

seconds_file="$root/upgrade/.seconds"
last="$(cat "$seconds_file" 2>/dev/null || true)"
log "building the previous release ${PREVIOUS_COMMIT:0:12}$([ -n "$last" ] && echo " (last time $last s)" || echo " (first time: minutes)")"
start=$SECONDS
src="$(mktemp -d /tmp/ac-previous.XXXXXX)"
# shellcheck disable=SC2064  # expand now: the path is fixed
trap "rm -rf --one-file-system '$src'" EXIT
git -C "$repo" archive "$PREVIOUS_COMMIT" | tar -x -C "$src"

ca=/etc/ssl/certs/ca-certificates.crt mounts=()
if [ -f "$ca" ]; then  # as build.sh: pip inside the build trusts the host's CA bundle
  printf '[global]\ncert = /run/host-ca/ca-certificates.crt\n' >"$images/pip.conf"
  mounts=(-v "$ca:/run/host-ca/ca-certificates.crt:ro" -v "$images/pip.conf:/etc/pip.conf:ro")
fi
pm build --pull=never --runtime runc --format docker --network host \
  --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --layers=false "${mounts[@]}" \
  --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE" -f "$src/images/cortex/Dockerfile" -t "$REF" "$src" \
  >"$dir/build.log" 2>&1 || { tail -n 30 "$dir/build.log" >&2; die "building $REF failed"; }
pm save -q --format docker-archive -o "$dir/cortex.tar.tmp" "$REF" >/dev/null
mv "$dir/cortex.tar.tmp" "$dir/cortex.tar"
echo "$REF" >"$dir/cortex.ref"
rm -rf "$dir/chart" && cp -a "$src/charts/attested-cortex" "$dir/chart"
echo "$((SECONDS - start))" >"$seconds_file"
log "built $REF and its chart in $((SECONDS - start)) s: $dir"
