#!/usr/bin/env bash
# Builds, once, the peer the recall benchmarks run side by side: ai-memory (crates.io), pinned.
#
# Callers: `make peers`, bench/peer.py and bench/longmemeval.py (they use the cached binary
# when BENCH_PEER_AI_MEMORY is unset), a developer. Opt-in: `make deps` does not build it.
#
# Usage: hack/peers/ensure-ai-memory.sh [--print-bin]
#   Idempotent and flock-protected; a binary whose stamp names the pinned version is kept.
#   Built from source with the local cargo (`cargo install --locked`, one job at a time: the
#   machine is shared) into $ATTESTED_CORTEX_CACHE/peers/ai-memory-<version>; prints
#   "last time N s". Nothing in the repository is written.
set -euo pipefail

AI_MEMORY_VERSION="0.10.0"
version="ai-memory-$AI_MEMORY_VERSION"
peers_root="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}/peers"
cache_root="$peers_root/$version"
bin="$cache_root/bin/ai-memory"

log() { echo "ensure-ai-memory: $*" >&2; }

for arg in "$@"; do
  case "$arg" in
    --print-bin) echo "$bin"; exit 0 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) log "unknown argument '$arg'"; exit 1 ;;
  esac
done

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock 9
if [[ -x "$bin" && "$(cat "$cache_root/.version" 2>/dev/null)" == "$version" ]]; then
  exit 0
fi
command -v cargo >/dev/null || { log "cargo not found: install a Rust toolchain"; exit 1; }
seconds="$(cat "$peers_root/.ai-memory.seconds" 2>/dev/null || true)"
log "building $version$([[ -n "$seconds" ]] \
  && echo " (last time ${seconds} s)" || echo " (first time: tens of minutes on one core)")"
start=$SECONDS
# CARGO_TARGET_DIR inside the cache: a rebuild after an interrupted one reuses its objects.
CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}" CARGO_TARGET_DIR="$cache_root/target" \
  cargo install ai-memory --version "$AI_MEMORY_VERSION" --locked --root "$cache_root" --force \
    --ignore-rust-version
echo "$version" >"$cache_root/.version"
echo $((SECONDS - start)) >"$peers_root/.ai-memory.seconds"
rm -rf "$cache_root/target"
log "built $version in $((SECONDS - start))s"
