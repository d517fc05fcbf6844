#!/usr/bin/env bash
# Builds, offline and once, the images the real one-node cluster runs, and exports them for the
# node's containerd.
#
# Callers: the Makefile (`images`, `node-deps`), hack/k8s/localkube/realnode.py (reads the
# exports), tests/support/realnode.py (its skip message names this script), CI.
#
# Usage: hack/images/build.sh [--print-dir]
#
# What it builds, with podman (Debian's package) in a private store under the cache, never the
# machine's default store:
#   1. localhost/attested-cortex/debian:trixie  a debootstrap (minbase) of Debian trixie,
#      imported as an image: the stand-in for debian:13.8-slim, which cannot be pulled here;
#   2. localhost/attested-cortex/python:3.13-trixie  images/python-debian on that base
#      (Debian's python3): the stand-in for python:3.11.14-slim-trixie;
#   3. localhost/attested-cortex/pause:3.10  images/pause, a `gcc -static` pause FROM scratch
#      (containerd's sandbox_image);
#   4. docker.io/attested-cortex/postgres-age:17 and docker.io/attested-cortex/cortex:<appVersion>
#      from the very Dockerfiles users build with Docker, the base passed as a build argument;
#   5. docker.io/attested-cortex/cloudnative-pg:<version> (images/cnpg, FROM scratch) around the
#      manager `hack/k8s/ensure-binaries.sh cnpg` built, when it is built (`make node-deps`
#      builds it; without it this image is skipped and the real node runs without CloudNativePG);
#   6. docker.io/attested-cortex/minio:<version> (images/minio, FROM scratch) around the MinIO
#      server `hack/k8s/ensure-binaries.sh minio` built, when it is built: the object store of
#      the backup e2e and `make run CORTEX=ha` (ADR 0037; never in the chart).
# Each image is saved as a docker archive in <cache>/images/out/<name>.tar, which
# `ctr -n k8s.io images import` loads into the node. An image is rebuilt only when the hash
# of its inputs (Dockerfile, context files, base, this script) changes, so a second run only
# hashes files. flock serialises concurrent runs.
#
# Builds use the host network (apt and pip inside the build reach the package mirrors as the
# host does, and no podman bridge or iptables rule is left behind) and lower rlimits only (runc
# refuses to raise them here). pip inside the build trusts the host's CA bundle, mounted read-only
# for the RUN steps; nothing of it is kept in an image.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}/images"
out="$cache/out"
store="$cache/podman"
readonly SUITE=trixie
readonly BASE_IMAGE=localhost/attested-cortex/debian:trixie
readonly PYTHON_IMAGE=localhost/attested-cortex/python:3.13-trixie
readonly PAUSE_IMAGE=localhost/attested-cortex/pause:3.10
readonly POSTGRES_IMAGE=docker.io/attested-cortex/postgres-age:17
app_version="$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$repo/charts/attested-cortex/Chart.yaml")"
readonly CORTEX_IMAGE="docker.io/attested-cortex/cortex:$app_version"
cnpg_version="$(sed -n 's/^CNPG_VERSION=v//p' "$repo/hack/k8s/versions.env")"
readonly CNPG_IMAGE="docker.io/attested-cortex/cloudnative-pg:$cnpg_version"
minio_version="$(sed -n 's/^MINIO_VERSION=//p' "$repo/hack/k8s/versions.env")"
readonly MINIO_IMAGE="docker.io/attested-cortex/minio:${minio_version#v0.0.0-}"

die() { echo "images: $*" >&2; exit 1; }
log() { echo "images: $*" >&2; }

pm() {  # podman on the private store
  podman --root "$store/root" --runroot "$store/run" --storage-driver overlay \
    --cgroup-manager cgroupfs --events-backend file "$@"
}

hash_inputs() {  # hash_inputs FILE|DIR...: one sha256 over the content and names of the inputs
  local f
  {
    sha256sum "${BASH_SOURCE[0]}"
    for f in "$@"; do
      if [ -d "$f" ]; then
        find "$f" -type f ! -path '*/__pycache__/*' ! -path '*.egg-info/*' ! -name '*.pyc' \
          -print0 | sort -z \
          | xargs -0 -r sha256sum
      else
        sha256sum "$f"
      fi
    done
  } | sed "s#  $repo/#  #" | sha256sum | cut -d' ' -f1
}

is_current() {  # is_current NAME HASH: the export exists and was made from these inputs
  [ -f "$out/$1.tar" ] && [ -f "$out/$1.sha" ] && [ "$(cat "$out/$1.sha")" = "$2" ] \
    && pm image exists "$(cat "$out/$1.ref")"
}

export_image() {  # export_image NAME REF HASH
  pm save -q --format docker-archive -o "$out/$1.tar.tmp" "$2" >/dev/null
  mv "$out/$1.tar.tmp" "$out/$1.tar"
  echo "$2" >"$out/$1.ref"
  echo "$3" >"$out/$1.sha"
}

build_flags=(--pull=never --runtime runc --format docker --network host
  --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --layers=false)

podman_build() {  # podman_build REF DOCKERFILE CONTEXT [build args...]
  local ref="$1" file="$2" context="$3" start=$SECONDS; shift 3
  local ca=/etc/ssl/certs/ca-certificates.crt mounts=()
  if [ -f "$ca" ]; then
    printf '[global]\ncert = /run/host-ca/ca-certificates.crt\n' >"$cache/pip.conf"
    mounts=(-v "$ca:/run/host-ca/ca-certificates.crt:ro" -v "$cache/pip.conf:/etc/pip.conf:ro")
  fi
  log "building $ref ($file)"
  pm build "${build_flags[@]}" "${mounts[@]}" "$@" -f "$file" -t "$ref" "$context" \
    >"$cache/build-$(basename "$(dirname "$file")").log" 2>&1 \
    || { tail -n 30 "$cache/build-$(basename "$(dirname "$file")").log" >&2; die "building $ref failed"; }
  log "built $ref in $((SECONDS - start))s"
}

# The Debian archive apt is configured with here, as hack/pg/ensure-age-root.sh finds it.
debian_mirror() {
  if [ -n "${ATTESTED_CORTEX_DEBIAN_MIRROR:-}" ]; then echo "$ATTESTED_CORTEX_DEBIAN_MIRROR"; return; fi
  # shellcheck disable=SC2016  # $(REPO_URI) is apt's format field
  apt-get indextargets --no-release-info --format '$(REPO_URI)' 'Identifier: Packages' 2>/dev/null \
    | grep -E '/debian/?$' | head -n 1 || true
}

base_image() {  # 1. debootstrap of trixie, imported (the rootfs tarball is kept: a re-import is cheap)
  local stamp="trixie minbase v1" tarball="$cache/debian-$SUITE.tar"
  if [ -f "$tarball" ] && [ "$(cat "$tarball.stamp" 2>/dev/null)" = "$stamp" ]; then
    pm image exists "$BASE_IMAGE" && return 0
  else
    local mirror tmp start=$SECONDS
    mirror="$(debian_mirror)"
    [ -n "$mirror" ] || die "found no Debian repository in apt's sources; set ATTESTED_CORTEX_DEBIAN_MIRROR"
    tmp="$(mktemp -d "$cache/debootstrap.XXXXXX")"
    chmod 755 "$tmp"
    # shellcheck disable=SC2064  # expand now: the path is fixed
    trap "rm -rf --one-file-system '$tmp'" EXIT
    log "debootstrap of Debian $SUITE (once; a few minutes)"
    debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
      "$SUITE" "$tmp" "$mirror" >"$cache/debootstrap.log" 2>&1 \
      || die "debootstrap failed; see $cache/debootstrap.log"
    # Shaped like the slim images: no docs, no service starts, no recommends, empty apt lists.
    printf '#!/bin/sh\nexit 101\n' >"$tmp/usr/sbin/policy-rc.d" && chmod 755 "$tmp/usr/sbin/policy-rc.d"
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
      >"$tmp/etc/apt/apt.conf.d/90attested-cortex"
    printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' \
      'path-exclude=/usr/share/info/*' >"$tmp/etc/dpkg/dpkg.cfg.d/90attested-cortex"
    rm -rf "$tmp"/var/lib/apt/lists/* "$tmp"/var/cache/apt/archives/*.deb "$tmp"/usr/share/doc/* \
      "$tmp"/usr/share/man/* "$tmp"/usr/share/info/*
    : >"$tmp/etc/resolv.conf"; : >"$tmp/etc/hostname"
    tar --numeric-owner --xattrs -C "$tmp" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball" && echo "$stamp" >"$tarball.stamp"
    rm -rf --one-file-system "$tmp"; trap - EXIT
    log "debootstrap done in $((SECONDS - start))s"
  fi
  pm import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' "$tarball" "$BASE_IMAGE" >/dev/null
}

pause_image() {  # 3. static pause FROM scratch
  local ctx="$cache/pause-context" h
  h="$(hash_inputs "$repo/images/pause")"
  is_current pause "$h" && return 0
  rm -rf "$ctx" && mkdir -p "$ctx"
  gcc -static -Os -s -o "$ctx/pause" "$repo/images/pause/pause.c"
  cp "$repo/images/pause/Dockerfile" "$ctx/"
  podman_build "$PAUSE_IMAGE" "$ctx/Dockerfile" "$ctx"
  export_image pause "$PAUSE_IMAGE" "$h"
}

cnpg_image() {  # 5. CloudNativePG's manager FROM scratch, when ensure-binaries.sh built it
  local bin manager ctx="$cache/cnpg-context" h
  bin="$("$repo/hack/k8s/ensure-binaries.sh" --print-bin-dir)"
  manager="$bin/cnpg"
  if [ ! -x "$manager" ] || [ "$(cat "$bin/.cnpg.version" 2>/dev/null)" != "v$cnpg_version" ]; then
    log "no CloudNativePG manager v$cnpg_version built (hack/k8s/ensure-binaries.sh cnpg): image skipped"
    return 0
  fi
  h="$( (hash_inputs "$repo/images/cnpg"; sha256sum "$manager" | cut -d' ' -f1) | sha256sum | cut -d' ' -f1)"
  is_current cnpg "$h" && return 0
  local arch; arch="$(dpkg --print-architecture)"  # amd64, arm64: Go's names too
  rm -rf "$ctx" && mkdir -p "$ctx/rootfs/operator"
  install -m 0755 "$manager" "$ctx/rootfs/operator/manager_$arch"
  ln -s "operator/manager_$arch" "$ctx/rootfs/manager"
  cp "$repo/images/cnpg/Dockerfile" "$ctx/"
  podman_build "$CNPG_IMAGE" "$ctx/Dockerfile" "$ctx"
  export_image cnpg "$CNPG_IMAGE" "$h"
  rm -rf "$ctx"
}

minio_image() {  # 6. MinIO's server FROM scratch, when ensure-binaries.sh built it
  local bin server ctx="$cache/minio-context" h
  bin="$("$repo/hack/k8s/ensure-binaries.sh" --print-bin-dir)"
  server="$bin/minio"
  if [ ! -x "$server" ] || [ "$(cat "$bin/.minio.version" 2>/dev/null)" != "$minio_version" ]; then
    log "no MinIO $minio_version built (hack/k8s/ensure-binaries.sh minio): image skipped"
    return 0
  fi
  h="$( (hash_inputs "$repo/images/minio"; sha256sum "$server" | cut -d' ' -f1) | sha256sum | cut -d' ' -f1)"
  is_current minio "$h" && return 0
  rm -rf "$ctx" && mkdir -p "$ctx/rootfs"
  install -m 0755 "$server" "$ctx/rootfs/minio"
  cp "$repo/images/minio/Dockerfile" "$ctx/"
  podman_build "$MINIO_IMAGE" "$ctx/Dockerfile" "$ctx"
  export_image minio "$MINIO_IMAGE" "$h"
  rm -rf "$ctx"
}

main() {
  case "${1:-}" in
    --print-dir) echo "$out"; return 0 ;;
    "") ;;
    *) die "usage: $0 [--print-dir]" ;;
  esac
  [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, podman's store)"
  local tool
  for tool in podman debootstrap gcc; do
    command -v "$tool" >/dev/null || die "$tool is missing; run hack/k8s/ensure-node-packages.sh"
  done
  mkdir -p "$out" "$store"
  exec 9>"$cache/.lock"
  flock -w 3600 9 || die "timed out waiting for another build (lock $cache/.lock)"

  base_image
  local base_id h
  base_id="$(pm image inspect --format '{{.Id}}' "$BASE_IMAGE")"
  pause_image

  h="$( (hash_inputs "$repo/images/postgres-age"; echo "$base_id") | sha256sum | cut -d' ' -f1)"
  if ! is_current postgres-age "$h"; then
    podman_build "$POSTGRES_IMAGE" "$repo/images/postgres-age/Dockerfile" "$repo/images/postgres-age" \
      --build-arg "BASE_IMAGE=$BASE_IMAGE"
    export_image postgres-age "$POSTGRES_IMAGE" "$h"
  fi

  h="$( (hash_inputs "$repo/images/python-debian"; echo "$base_id") | sha256sum | cut -d' ' -f1)"
  if ! pm image exists "$PYTHON_IMAGE" || [ "$(cat "$out/python.sha" 2>/dev/null)" != "$h" ]; then
    podman_build "$PYTHON_IMAGE" "$repo/images/python-debian/Dockerfile" "$repo/images/python-debian" \
      --build-arg "BASE_IMAGE=$BASE_IMAGE"
    echo "$h" >"$out/python.sha"
  fi
  local python_id
  python_id="$(pm image inspect --format '{{.Id}}' "$PYTHON_IMAGE")"
  h="$( (hash_inputs "$repo/images/cortex" "$repo/pyproject.toml" "$repo/README.md" \
    "$repo/operator" "$repo/.dockerignore"; echo "$python_id") | sha256sum | cut -d' ' -f1)"
  if ! is_current cortex "$h"; then
    podman_build "$CORTEX_IMAGE" "$repo/images/cortex/Dockerfile" "$repo" \
      --build-arg "PYTHON_IMAGE=$PYTHON_IMAGE"
    export_image cortex "$CORTEX_IMAGE" "$h"
  fi
  cnpg_image
  minio_image
  # Intermediate layers and replaced tags are garbage once exported.
  pm image prune -f >/dev/null 2>&1 || true
  log "ready in $out: pause postgres-age cortex$([ -f "$out/cnpg.tar" ] && echo ' cnpg')$([ -f "$out/minio.tar" ] && echo ' minio')"
}

main "$@"
