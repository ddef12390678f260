#!/usr/bin/env bash
# Builds prometheus and promtool from the Go module proxy (github.com/prometheus/prometheus,
# Apache-2.0) and caches them by version, as hack/build-envtest-bins.sh does the apiserver; the
# tests that need a real Prometheus (docs/alerts.md's rules, the chart's ServiceMonitor) use
# them.
#
#   hack/build-prometheus.sh            # prints the directory holding the binaries
#
# Env: KQO_CACHE (default ~/.cache/kafka-queue-operator), PROMETHEUS_VERSION (the Go module's
# version: v0.316.0 is Prometheus 3.16.0).
set -euo pipefail
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v0.316.0}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
RECIPE=1
OUT="$CACHE/prometheus/${PROMETHEUS_VERSION}-r${RECIPE}"
BINS=(prometheus promtool)
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
cd "$work"
go mod init kqo.local/prometheus >/dev/null 2>&1
{
  echo '//go:build tools'
  echo
  echo 'package tools'
  echo
  echo 'import ('
  for b in "${BINS[@]}"; do echo "	_ \"github.com/prometheus/prometheus/cmd/$b\""; done
  echo ')'
} > tools.go
go get "github.com/prometheus/prometheus@${PROMETHEUS_VERSION}" >&2
go mod tidy >&2
for b in "${BINS[@]}"; do
  echo "[build-prometheus] building $b ${PROMETHEUS_VERSION}" >&2
  CGO_ENABLED=0 go build -trimpath -o "$OUT/$b.tmp" "github.com/prometheus/prometheus/cmd/$b" >&2
  mv "$OUT/$b.tmp" "$OUT/$b"
done
echo "$OUT"
