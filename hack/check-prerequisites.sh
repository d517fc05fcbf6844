#!/usr/bin/env bash
# Checks what this machine must have before `make run`, `make test` or `make serve` builds or
# starts anything, and stops with one clear line per missing thing (never a Go error twenty
# minutes into a build). Callers: the Makefile (first step of run, test, serve, test-fast).
#
# Usage: hack/check-prerequisites.sh run|test|serve|fast
#   Debian 12 or newer (apt packages and a debootstrap'd trixie root), Python >= 3.11, root (the
#   package installs; the real node's namespaces and mounts), memory and free disk for the target;
#   Go >= 1.26 only when a build from source is still to come (the control plane for test and run,
#   the node's binaries for run): a warm cache needs no Go.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="${1:-test}"
python="${PYTHON:-python3}"
cache="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}"
problems=()

# shellcheck source=/dev/null
os_id="$(. /etc/os-release 2>/dev/null && echo "${ID:-unknown} ${ID_LIKE:-} ${VERSION_ID:-0}")" || os_id="unknown"
read -r id_name _ <<<"$os_id"
version="${os_id##* }"
if [[ "$id_name" != debian || "${version%%.*}" -lt 12 ]]; then
  problems+=("Debian 12 or newer is needed (apt-get, debootstrap); this is: ${os_id}")
fi

if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  found="$("$python" --version 2>&1 | head -1 || true)"
  problems+=("Python >= 3.11 is needed as \$PYTHON (found $python: ${found:-not runnable})")
fi

if [[ "$target" != fast && "$(id -u)" != 0 ]]; then
  problems+=("root is needed (Debian packages; PostgreSQL and the node run as their own users): run as root")
fi

memory_gib=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 / 1024 ))
case "$target" in run|test) need_memory=6 ;; *) need_memory=2 ;; esac
if (( memory_gib + 1 < need_memory )); then
  problems+=("at least ${need_memory} GiB of memory is needed for make $target (this machine: ${memory_gib} GiB)")
fi

# What is still to be built from source decides whether Go is needed and how much disk.
missing=()
# make run builds only its example's groups (hack/runplan.py): CORTEX=ha adds CloudNativePG and
# the MinIO of its backups.
if [[ "$target" == test ]]; then
  mapfile -t missing < <("$here/k8s/ensure-binaries.sh" --missing)
elif [[ "$target" == run ]]; then
  run_groups=(control-plane node-base)
  [[ "${CORTEX:-managed}" == ha ]] && run_groups+=(cnpg minio)
  mapfile -t missing < <("$here/k8s/ensure-binaries.sh" --missing "${run_groups[@]}")
fi
if (( ${#missing[@]} > 0 )); then
  go_bin="$(command -v go || echo /usr/local/go/bin/go)"
  go_version="$("$go_bin" env GOVERSION 2>/dev/null || true)"   # e.g. go1.26.0
  go_minor="${go_version#go1.}"; go_minor="${go_minor%%.*}"
  if [[ -z "$go_version" || ! "$go_minor" =~ ^[0-9]+$ || "$go_minor" -lt 26 ]]; then
    problems+=("Go >= 1.26 is needed to build ${missing[*]} from source (found: ${go_version:-none}; /usr/local/go/bin is searched too)")
  fi
fi

mkdir -p "$cache" 2>/dev/null || true
free_gib=$(( $(df -Pk "$cache" 2>/dev/null | awk 'NR == 2 {print $4}') / 1024 / 1024 ))
if (( ${#missing[@]} > 0 )); then need_disk=20; else need_disk=3; fi
[[ "$target" == fast || "$target" == serve ]] && need_disk=2
if (( free_gib < need_disk )); then
  problems+=("at least ${need_disk} GiB free is needed under $cache (free: ${free_gib} GiB; the Go build cache and images take most)")
fi

if (( ${#problems[@]} > 0 )); then
  for line in "${problems[@]}"; do echo "make $target: $line" >&2; done
  exit 1
fi
