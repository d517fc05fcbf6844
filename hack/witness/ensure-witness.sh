#!/usr/bin/env bash
# Builds, once, a real C2SP witness no one here wrote: torchwood's litewitness (and its
# witnessctl), the c2sp.org/tlog-witness implementation of filippo.io/torchwood, pinned.
#
# Callers: tests/attest/test_real_witness.py (it skips naming this script when the binaries
# are absent), a developer. Opt-in: `make deps` does not build it.
#
# Usage: hack/witness/ensure-witness.sh [--print-bin-dir]
#   Idempotent and flock-protected; binaries whose stamp names the pinned version are kept.
#   Built from source with the local Go toolchain (GOTOOLCHAIN=local) through a generated
#   wrapper module under $ATTESTED_CORTEX_CACHE/witness/<version>/src; prints "last time N s".
#   Nothing in the repository is written.
set -euo pipefail

# sigsum-go v0.14.1's sigsum-witness cosigns one Sigsum log only (origin
# sigsum.org/v1/tree/<key hash>); torchwood v0.6.1's litewitness cosigns any C2SP log whose
# origin and key it is given (c2sp.org/tlog-witness), so it is the one built here.
TORCHWOOD_VERSION="v0.6.1"
version="torchwood-$TORCHWOOD_VERSION"
cache_root="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}/witness/$version"
bin_dir="$cache_root/bin"
src_dir="$cache_root/src"
export GOTOOLCHAIN=local

log() { echo "ensure-witness: $*" >&2; }

for arg in "$@"; do
  case "$arg" in
    --print-bin-dir) echo "$bin_dir"; exit 0 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) log "unknown argument '$arg'"; exit 1 ;;
  esac
done

mkdir -p "$bin_dir"
exec 9>"$cache_root/.lock"
flock 9
if [[ -x "$bin_dir/litewitness" && -x "$bin_dir/witnessctl" \
      && "$(cat "$bin_dir/.version" 2>/dev/null)" == "$version" ]]; then
  exit 0
fi
seconds="$(cat "${cache_root%/*}/.seconds" 2>/dev/null || true)"
log "building litewitness and witnessctl $version$([[ -n "$seconds" ]] \
  && echo " (last time ${seconds} s)" || echo " (first time: a minute or two)")"
start=$SECONDS
rm -rf "$src_dir" && mkdir -p "$src_dir"
(
  cd "$src_dir"
  go mod init attested-cortex.local/witness >/dev/null 2>&1
  go mod edit -require="filippo.io/torchwood@$TORCHWOOD_VERSION"
  CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$bin_dir/" \
    filippo.io/torchwood/cmd/litewitness filippo.io/torchwood/cmd/witnessctl
)
echo "$version" >"$bin_dir/.version"
echo $((SECONDS - start)) >"${cache_root%/*}/.seconds"
log "built $version in $((SECONDS - start))s"
