#!/usr/bin/env bash
# Installs, once, the Debian packages the real one-node cluster and the offline image builds need.
#
# Callers: the Makefile (`node-deps`, `images`, `e2e`), hack/images/build.sh, and the message of
# tests/support/realnode.py when something is missing. Idempotent: a machine that has every
# command installs nothing and runs no apt-get at all. As root (apt-get needs it).
#
#   containerd, runc             the node's container runtime (its own state/socket dirs, never
#                                the system containerd service: that is stopped and disabled)
#   containernetworking-plugins  bridge, host-local, portmap, loopback (/usr/lib/cni)
#   podman                       offline image builds (`podman build --pull=never`)
#   debootstrap                  the Debian trixie base image
#   gcc, libc6-dev               the statically linked pause binary (libc.a)
#   iptables, conntrack          kube-proxy (iptables mode) and the kubelet
#   iproute2                     `ip` for the stop check (no veth, no netns left)
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1; }
have containerd || need+=(containerd)
have runc || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] \
  && [ -x /usr/lib/cni/loopback ] || need+=(containernetworking-plugins)
have podman || need+=(podman)
have debootstrap || need+=(debootstrap)
have gcc || need+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -n "$(find /usr/lib -name libc.a -print -quit 2>/dev/null)" ] \
  || need+=(libc6-dev)
have iptables || need+=(iptables)
have conntrack || need+=(conntrack)
have ip || need+=(iproute2)

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing system packages: ${need[*]}; run as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "ensure-node-packages: installing ${need[*]}" >&2
  apt-get update -qq
  # policy-rc.d keeps the package's own containerd service from starting: the node runs its
  # own containerd with private state and socket directories.
  policy=/usr/sbin/policy-rc.d
  created_policy=false
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && created_policy=true
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  if $created_policy; then rm -f "$policy"; fi
fi
