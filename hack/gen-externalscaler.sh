#!/usr/bin/env bash
# Regenerates internal/scaler/externalscaler's Go code from KEDA's own external scaler proto
# (pkg/scalers/externalscaler/externalscaler.proto of the KEDA release KEDA_VERSION, read from
# the Go module proxy): protoc from Maven Central (cached in $KQO_CACHE, like the Kafka jars),
# protoc-gen-go and protoc-gen-go-grpc pinned in hack/tools/go.mod. The generated files are
# committed, so building and testing never need protoc.
set -euo pipefail
PROTOC_VERSION="${PROTOC_VERSION:-4.36.2}"
KEDA_VERSION="${KEDA_VERSION:-v2.20.2}"
CACHE="${KQO_CACHE:-$HOME/.cache/kafka-queue-operator}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "$(uname -m)" in
  x86_64) ARCH=x86_64 ;;
  aarch64|arm64) ARCH=aarch_64 ;;
  *) echo "gen-externalscaler.sh: no protoc for $(uname -m)" >&2; exit 2 ;;
esac
PROTOC="$CACHE/protoc/$PROTOC_VERSION/protoc"
if [[ ! -x "$PROTOC" ]]; then
  mkdir -p "$(dirname "$PROTOC")"
  curl -fsSL -o "$PROTOC.tmp" \
    "https://repo1.maven.org/maven2/com/google/protobuf/protoc/$PROTOC_VERSION/protoc-$PROTOC_VERSION-linux-$ARCH.exe"
  chmod +x "$PROTOC.tmp" && mv "$PROTOC.tmp" "$PROTOC"
fi
BIN="$(mktemp -d)"
trap 'rm -rf "$BIN"' EXIT
cd "$ROOT"
GOBIN="$BIN" go install -modfile=hack/tools/go.mod \
  google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
KEDA_DIR="$(go mod download -json "github.com/kedacore/keda/v2@$KEDA_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
cp "$KEDA_DIR/pkg/scalers/externalscaler/externalscaler.proto" "$BIN/"
PKG=github.com/kafkaqueues/kafka-queue-operator/internal/scaler/externalscaler
cd internal/scaler/externalscaler
PATH="$BIN:$PATH" "$PROTOC" -I "$BIN" \
  --go_out=. --go_opt=paths=source_relative --go_opt=Mexternalscaler.proto=$PKG \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative --go-grpc_opt=Mexternalscaler.proto=$PKG \
  externalscaler.proto
