#!/usr/bin/env bash
# Installs the Debian packages the test suite and `make run` need, once (idempotent, as root).
set -euo pipefail
need=()
command -v debootstrap >/dev/null || need+=(debootstrap)
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql-15)
command -v flock >/dev/null || need+=(util-linux)
command -v setpriv >/dev/null || need+=(util-linux)
command -v unshare >/dev/null || need+=(util-linux)
command -v openssl >/dev/null || need+=(openssl)
# tests/gitops/test_health.py runs the Argo CD health check (Lua) we ship: 0.3 MB.
command -v lua5.4 >/dev/null || need+=(lua5.4)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${need[*]}; run as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
