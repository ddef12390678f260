#!/usr/bin/env bash
# Builds kube-apiserver, etcd and kubectl from the Go module proxy and caches them by version
# outside the clone, so envtest can run with no downloads of prebuilt binaries (kubectl runs
# the docs' commands verbatim in tests).
#
#   hack/build-envtest-bins.sh            # prints the directory holding the binaries
#
# Env: KQO_CACHE (default ~/.cache/kafka-queue-operator), KUBE_VERSION, ETCD_VERSION.
set -euo pipefail
# shellcheck source=hack/lib-kubernetes-module.sh
source "$(dirname "$0")/lib-kubernetes-module.sh"

KUBE_VERSION="${KUBE_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
# Bump RECIPE when the way the binaries are built changes, so stale caches are rebuilt.
RECIPE=2
OUT="$CACHE/envtest/k8s-${KUBE_VERSION}-etcd-${ETCD_VERSION}-r${RECIPE}"

# finish prints the directory envtest should use. envtest starts these binaries as children of
# the test process; wrappers make them die with it (setpriv --pdeathsig, util-linux) instead
# of lingering when a test run is killed hard.
finish() {
  if command -v setpriv >/dev/null 2>&1; then
    mkdir -p "$OUT/wrapped"
    for b in kube-apiserver etcd kubectl; do
      [[ -x "$OUT/wrapped/$b" ]] && continue
      # A temp name of its own: test packages run this at the same time.
      tmp="$(mktemp "$OUT/wrapped/$b.XXXXXX")"
      printf '#!/bin/sh\nexec setpriv --pdeathsig KILL "%s/%s" "$@"\n' "$OUT" "$b" > "$tmp"
      chmod +x "$tmp"
      mv -f "$tmp" "$OUT/wrapped/$b"
    done
    echo "$OUT/wrapped"
  else
    echo "$OUT"
  fi
}

have_all() { [[ -x "$OUT/kube-apiserver" && -x "$OUT/etcd" && -x "$OUT/kubectl" ]]; }
if have_all; then
  finish
  exit 0
fi
mkdir -p "$OUT"
# Concurrent test packages may ask at once: one builds, the others wait for it.
exec 9>"$OUT.lock"
flock 9
if have_all; then
  finish
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log() { echo "[build-envtest-bins] $*" >&2; }

if [[ ! -x "$OUT/etcd" ]]; then
  log "building etcd ${ETCD_VERSION}"
  mkdir -p "$work/etcd"
  cd "$work/etcd"
  go mod init kqo.local/etcd >/dev/null 2>&1
  cat > main.go <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" >&2
  go mod tidy >&2
  CGO_ENABLED=0 go build -trimpath -o "$OUT/etcd.tmp" . >&2
  mv "$OUT/etcd.tmp" "$OUT/etcd"
fi

if [[ ! -x "$OUT/kube-apiserver" || ! -x "$OUT/kubectl" ]]; then
  log "building kube-apiserver and kubectl ${KUBE_VERSION}"
  mkdir -p "$work/kas"
  cd "$work/kas"
  kube_module_init kqo.local/kas "$KUBE_VERSION"
  cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
GO
  go mod tidy >&2
  ldflags="$(kube_ldflags "$KUBE_VERSION")"
  if [[ ! -x "$OUT/kube-apiserver" ]]; then
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags -X k8s.io/component-base/version/verflag.programName=kube-apiserver" -o "$OUT/kube-apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver >&2
    mv "$OUT/kube-apiserver.tmp" "$OUT/kube-apiserver"
  fi
  # kubectl reports its version from k8s.io/client-go/pkg/version.
  kubectl_ldflags="-X k8s.io/client-go/pkg/version.gitVersion=${KUBE_VERSION} -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$(echo "$KUBE_VERSION" | cut -d. -f2) $ldflags"
  CGO_ENABLED=0 go build -trimpath -ldflags "$kubectl_ldflags" -o "$OUT/kubectl.tmp" k8s.io/kubernetes/cmd/kubectl >&2
  mv "$OUT/kubectl.tmp" "$OUT/kubectl"
fi
finish
