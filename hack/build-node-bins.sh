#!/usr/bin/env bash
# Builds the node half of a Kubernetes cluster from the Go module proxy — kubelet,
# kube-controller-manager and kube-scheduler — with the same recipe and cache as
# hack/build-envtest-bins.sh (k8s.io/kubernetes at KUBE_VERSION, its staging modules mapped to
# the published v0.X.Y, version ldflags), so test/rig can start a real node (see
# docs/node-rig.md).
#
#   hack/build-node-bins.sh            # prints the directory holding the binaries
#
# Env: KQO_CACHE (default ~/.cache/kafka-queue-operator), KUBE_VERSION.
set -euo pipefail
# shellcheck source=hack/lib-kubernetes-module.sh
source "$(dirname "$0")/lib-kubernetes-module.sh"

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
# Bump RECIPE when the way the binaries are built changes, so stale caches are rebuilt.
RECIPE=1
OUT="$CACHE/node/k8s-${KUBE_VERSION}-r${RECIPE}"
BINS=(kubelet kube-controller-manager kube-scheduler)

have_all() {
  local b
  for b in "${BINS[@]}"; do [[ -x "$OUT/$b" ]] || return 1; done
}
if have_all; then
  echo "$OUT"
  exit 0
fi
mkdir -p "$OUT"
exec 9>"$OUT.lock"
flock 9
if have_all; then
  echo "$OUT"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log() { echo "[build-node-bins] $*" >&2; }

cd "$work"
kube_module_init kqo.local/node "$KUBE_VERSION"
{
  echo '//go:build tools'
  echo
  echo 'package tools'
  echo
  echo 'import ('
  for b in "${BINS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$b\""; done
  echo ')'
} > tools.go
go mod tidy >&2
ldflags="$(kube_ldflags "$KUBE_VERSION")"
for b in "${BINS[@]}"; do
  [[ -x "$OUT/$b" ]] && continue
  log "building $b ${KUBE_VERSION}"
  # Static, no cgo: the kubelet's cgo parts (cadvisor's libpfm, SELinux) have pure-Go fallbacks.
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags -X k8s.io/component-base/version/verflag.programName=$b" -o "$OUT/$b.tmp" "k8s.io/kubernetes/cmd/$b" >&2
  mv "$OUT/$b.tmp" "$OUT/$b"
done
echo "$OUT"
