#!/usr/bin/env bash
# Installs what the node rig (test/rig/node.go) runs besides the Kubernetes binaries:
# Debian's containerd, runc, the CNI plugins, iptables and util-linux (nsenter), when missing.
# Needs root and Debian's package mirrors.
set -euo pipefail
need=()
command -v containerd >/dev/null 2>&1 || need+=(containerd)
command -v runc >/dev/null 2>&1 || need+=(runc)
[[ -x /usr/lib/cni/bridge ]] || need+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v nsenter >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
if ((${#need[@]})); then
  echo "[install-node-deps] installing: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >&2
fi
# Debian's containerd package may start its own daemon through systemd; the rig runs its own
# (own socket, root and state), so a system one does not interfere.
