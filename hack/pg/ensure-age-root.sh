#!/usr/bin/env bash
# Builds, once, a minimal Debian trixie root holding PostgreSQL 17, Apache AGE (postgresql-17-age) and
# pgvector (postgresql-17-pgvector).
#
# Callers: `make deps` (so `make test`, `make run`, `make bench`), hack/support/pgservers.py (which
# tells the user to run this when the root is missing) and tests/infra (concurrency check).
#
# The root lives outside the repository, in ${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}/
# pg-age-trixie. A completed root carries a stamp file and is reused at once. Concurrent runs are
# serialised with flock; the root is built in a temporary directory next to it and renamed into
# place, so nobody ever sees half a root. A root built before pgvector joined (base stamp only, no
# extras stamp) is upgraded in place: the missing packages are added to it, which only adds files,
# so a server running from the root meanwhile is not disturbed. The base stamp keeps its v1 text on
# purpose: an older copy of this script (another checkout) accepts such a root as it is instead of
# rebuilding it under everyone's feet, and this one adds pgvector to a root such a copy built. The Debian mirror is the one this machine's apt already
# uses (override with ATTESTED_CORTEX_DEBIAN_MIRROR).
#
# Usage: hack/pg/ensure-age-root.sh [--print-root]
set -euo pipefail

readonly SUITE=trixie
readonly BASE_PACKAGES=(postgresql-17 postgresql-17-age)
readonly EXTRA_PACKAGES=(postgresql-17-pgvector)
readonly PACKAGES=("${BASE_PACKAGES[@]}" "${EXTRA_PACKAGES[@]}")
readonly STAMP_NAME=.attested-cortex-root
readonly STAMP_CONTENT="pg-age-trixie v1: ${BASE_PACKAGES[*]}"
readonly EXTRAS_STAMP_NAME=.attested-cortex-extras
readonly EXTRAS_STAMP_CONTENT="extras v1: ${EXTRA_PACKAGES[*]}"

cache=${ATTESTED_CORTEX_CACHE:-$HOME/.cache/attested-cortex}
root=$cache/pg-age-trixie
print_root=false
case "${1:-}" in
  --print-root) print_root=true ;;
  "") ;;
  *) echo "usage: $0 [--print-root]" >&2; exit 2 ;;
esac

has_base() {
  [ -f "$root/$STAMP_NAME" ] && [ "$(cat "$root/$STAMP_NAME")" = "$STAMP_CONTENT" ]
}

is_complete() {
  has_base && [ -f "$root/$EXTRAS_STAMP_NAME" ] \
    && [ "$(cat "$root/$EXTRAS_STAMP_NAME")" = "$EXTRAS_STAMP_CONTENT" ]
}

finish() {
  if $print_root; then echo "$root"; fi
  exit 0
}

die() {
  echo "ensure-age-root: $*" >&2
  exit 1
}

# The Debian archive apt is configured with here: the first repository whose path ends in /debian/.
debian_mirror() {
  if [ -n "${ATTESTED_CORTEX_DEBIAN_MIRROR:-}" ]; then
    echo "$ATTESTED_CORTEX_DEBIAN_MIRROR"
    return
  fi
  # shellcheck disable=SC2016  # $(REPO_URI) is apt's format field, not a shell expansion
  apt-get indextargets --no-release-info --format '$(REPO_URI)' 'Identifier: Packages' 2>/dev/null \
    | grep -E '/debian/?$' | head -n 1 || true  # none found: the caller says what to do
}

check_prerequisites() {
  [ "$(id -u)" = 0 ] || die "must run as root (debootstrap and chroot need it): sudo $0"
  command -v debootstrap >/dev/null \
    || die "debootstrap is missing; fix it with: hack/ensure-system-packages.sh (or: apt-get install -y debootstrap)"
  command -v flock >/dev/null \
    || die "flock is missing; fix it with: hack/ensure-system-packages.sh (or: apt-get install -y util-linux)"
}

# Keeps the root small and quiet: no recommends, no docs or man pages, no service start, no
# default cluster (the tests initdb their own clusters).
configure_root() {
  local dir=$1
  printf '#!/bin/sh\nexit 101\n' >"$dir/usr/sbin/policy-rc.d"
  chmod 755 "$dir/usr/sbin/policy-rc.d"
  printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' \
    >"$dir/etc/apt/apt.conf.d/90attested-cortex"
  printf '%s\n' 'path-exclude=/usr/share/doc/*' 'path-exclude=/usr/share/man/*' \
    'path-exclude=/usr/share/info/*' 'path-exclude=/usr/share/locale/*' \
    'path-include=/usr/share/locale/locale.alias' >"$dir/etc/dpkg/dpkg.cfg.d/90attested-cortex"
  mkdir -p "$dir/etc/postgresql-common"
  echo 'create_main_cluster = false' >"$dir/etc/postgresql-common/createcluster.conf"
}

install_postgres() {
  local dir=$1
  chroot "$dir" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive chroot "$dir" apt-get install -y -qq "${PACKAGES[@]}" >/dev/null
  chroot "$dir" apt-get clean
  strip_root "$dir"
  check_root "$dir"
}

check_root() {
  local dir=$1
  [ -f "$dir/usr/lib/postgresql/17/lib/age.so" ] || die "age.so missing after installing ${PACKAGES[*]}"
  [ -f "$dir/usr/lib/postgresql/17/lib/vector.so" ] \
    || die "vector.so missing after installing ${PACKAGES[*]}"
  chroot "$dir" id -u postgres >/dev/null || die "no postgres user in the root"
}

# A root without the extras stamp (built before pgvector joined) gains the packages it lacks. apt-get install would refuse:
# strip_root removed LLVM under postgresql-17's feet, so apt sees broken dependencies; the missing
# packages are fetched with apt-get download and unpacked with dpkg, whose dependency check only
# looks at what they need themselves (postgresql-17, present).
upgrade() {
  local dir=$root missing=() pkg
  for pkg in "${PACKAGES[@]}"; do
    chroot "$dir" dpkg-query -W -f '${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$pkg")
  done
  echo "ensure-age-root: adding ${missing[*]:-nothing} to the existing root $root" >&2
  if [ ${#missing[@]} -gt 0 ]; then
    chroot "$dir" apt-get update -qq
    rm -rf "$dir/tmp/attested-cortex-debs"
    mkdir -p "$dir/tmp/attested-cortex-debs"
    chmod 777 "$dir/tmp/attested-cortex-debs"  # apt-get download runs as the root's _apt user
    chroot "$dir" sh -c "cd /tmp/attested-cortex-debs && apt-get download -qq ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive chroot "$dir" sh -c 'dpkg -i /tmp/attested-cortex-debs/*.deb' \
      >/dev/null
    rm -rf "$dir/tmp/attested-cortex-debs"
    strip_root "$dir"
  fi
  check_root "$dir"
  echo "$EXTRAS_STAMP_CONTENT" >"$dir/$EXTRAS_STAMP_NAME"
  echo "ensure-age-root: ready: $root ($(du -sh "$root" | cut -f1))" >&2
}

# JIT is what pulls in LLVM and Z3 (about 170 MB of the root); the test and dev servers run with
# jit = off, so those libraries and PostgreSQL's bitcode go. PostgreSQL itself does not link them.
strip_root() {
  local dir=$1
  chroot "$dir" dpkg --purge --force-depends libllvm19 libz3-4 >/dev/null 2>&1 || true
  rm -rf "$dir"/usr/lib/postgresql/17/lib/llvmjit* "$dir"/usr/lib/postgresql/17/lib/bitcode
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/usr/share/doc/* \
    "$dir"/usr/share/man/* "$dir"/usr/share/info/*
  find "$dir/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
}

build() {
  local mirror tmp
  mirror=$(debian_mirror)
  [ -n "$mirror" ] || die "found no Debian repository in apt's sources; set ATTESTED_CORTEX_DEBIAN_MIRROR"
  tmp=$(mktemp -d "$cache/pg-age-trixie.build.XXXXXX")
  chmod 755 "$tmp"  # it becomes "/" for the root's postgres and _apt users
  # Only a directory we created is removed, and nothing is mounted in it once debootstrap returns.
  trap 'rm -rf --one-file-system "$tmp"' EXIT
  echo "ensure-age-root: building the PostgreSQL 17 + AGE root in $root (once; a few minutes)" >&2
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$SUITE" "$tmp" "$mirror" >"$tmp.log" 2>&1 \
    || die "debootstrap failed; see $tmp.log"
  configure_root "$tmp"
  install_postgres "$tmp"
  echo "$EXTRAS_STAMP_CONTENT" >"$tmp/$EXTRAS_STAMP_NAME"
  echo "$STAMP_CONTENT" >"$tmp/$STAMP_NAME"
  if [ -e "$root" ]; then
    mv "$root" "$root.stale.$$"
    rm -rf --one-file-system "$root.stale.$$"
  fi
  mv "$tmp" "$root"
  trap - EXIT
  rm -f "$tmp.log"
  echo "ensure-age-root: ready: $root ($(du -sh "$root" | cut -f1))" >&2
}

if is_complete; then finish; fi
check_prerequisites
mkdir -p "$cache"
exec 9>"$cache/pg-age-trixie.lock"
flock -w 1800 9 || die "timed out waiting for another build (lock $cache/pg-age-trixie.lock)"
if ! is_complete; then
  if has_base; then upgrade; else build; fi
fi
finish
