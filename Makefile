# kafka-queue-operator — run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

KAFKA_VERSION ?= 4.4.0
# Packages run two at a time (each starts its own apiserver and brokers; docs/testing.md has
# the measurements behind -p 2); tests run in a random order, the seed printed first.
GO_TEST_P ?= 2
GO_TEST_PARALLEL ?= 8
SHUFFLE ?= $(shell date +%s)
# Expanded once: the seed printed is the seed used.
SHUFFLE := $(SHUFFLE)
GO_TEST_FLAGS ?= -p $(GO_TEST_P) -parallel $(GO_TEST_PARALLEL) -count=1 -shuffle=$(SHUFFLE) -timeout 45m
# Where make test writes `go test -json` (gotestsum --jsonfile) for hack/testtimes.
TEST_TIMES ?= tmp/test-times
GOTESTSUM := go tool -modfile=hack/tools/go.mod gotestsum
# Tests that load the whole machine and fail when other packages' rigs start beside them run
# after the rest, alone (docs/testing.md): 1,000 queues under two managers whose short lease
# renewals must not starve.
ALONE_TESTS := ^TestLeaderFailoverMidBatch$$
ALONE_PKGS := ./test/e2e/
# The two longest packages first (go test starts packages in the order named), so they overlap
# the rest instead of running last on their own.
TEST_PKGS := ./test/node/ ./controllers/ ./...
IMG ?= ghcr.io/kafkaqueues/kafka-queue-operator:0.2.0
# VERSION is what `manager --version`, `republisher --version` and `kqctl version` print: the
# nearest tag (git describe), else the chart's appVersion marked as a development build.
VERSION ?= $(shell git describe --tags --dirty 2>/dev/null || echo v0.2.0-dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
VERSION_LDFLAGS = -X github.com/kafkaqueues/kafka-queue-operator/internal/version.Version=$(VERSION) -X github.com/kafkaqueues/kafka-queue-operator/internal/version.Commit=$(COMMIT)
CONTROLLER_GEN := go tool controller-gen

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: ## Generate DeepCopy methods (controller-gen).
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: externalscaler
externalscaler: ## Regenerate internal/scaler/externalscaler from KEDA's external scaler proto (protoc from Maven Central, KEDA's proto from the Go module proxy; the output is committed).
	hack/gen-externalscaler.sh

.PHONY: manifests
manifests: ## Generate CRDs and RBAC into config/ (controller-gen), docs/reference.md from the CRDs and docs/troubleshooting.md from the condition reasons.
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths="./controllers/...;./internal/webhook/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) webhook paths=./internal/webhook/... output:webhook:artifacts:config=config/webhook
	go run ./hack/gen-api-reference > docs/reference.md
	go run ./hack/gen-troubleshooting > docs/troubleshooting.md
	cp config/crd/bases/*.yaml charts/kafka-queue-operator-crds/files/crds/
	cp config/rbac/role.yaml charts/kafka-queue-operator/files/rbac/role.yaml
	cp charts/kafka-queue-operator/values.yaml charts/kafka-queue-operator/files/defaults.yaml

GENERATED = api/v1alpha1/zz_generated.deepcopy.go config/crd/bases/*.yaml config/rbac/role.yaml config/webhook/manifests.yaml docs/reference.md docs/troubleshooting.md charts/kafka-queue-operator-crds/files/crds/*.yaml charts/kafka-queue-operator/files/rbac/role.yaml charts/kafka-queue-operator/files/defaults.yaml

.PHONY: verify
verify: fmt vet ## gofmt and go vet, then regenerate DeepCopy, CRDs, RBAC, the webhook config, docs/reference.md, docs/troubleshooting.md and the chart's copies; fail if any were stale.
	@before=$$(cat $(GENERATED) | sha256sum); \
	$(MAKE) -s generate manifests >/dev/null; \
	after=$$(cat $(GENERATED) | sha256sum); \
	if [ "$$before" != "$$after" ]; then echo "generated files were stale (now regenerated; commit them): $(GENERATED)"; exit 1; fi

.PHONY: fmt
fmt: ## Run gofmt.
	@test -z "$$(gofmt -l api cmd controllers internal test hack)" || { gofmt -l api cmd controllers internal test hack; echo "run gofmt -w"; exit 1; }

.PHONY: vet
vet: ## Run go vet.
	go vet ./...
	go vet -tags nodee2e ./test/node/...
	go vet -tags soak ./test/soak/

##@ Local rig (no Docker)

.PHONY: rig-bins
rig-bins: ## Build kube-apiserver, etcd and kubectl and resolve the Kafka jars (cached in $KQO_CACHE, default ~/.cache/kafka-queue-operator).
	hack/build-envtest-bins.sh
	hack/kafka-classpath.sh $(KAFKA_VERSION)

.PHONY: prom-bins
prom-bins: ## Build prometheus and promtool from the Go module proxy (cached in $KQO_CACHE; the chart's alert tests use them).
	hack/build-prometheus.sh

.PHONY: node-bins
node-bins: rig-bins ## Build kubelet, kube-controller-manager, kube-scheduler (cached like rig-bins) and install containerd, runc and the CNI plugins when missing (root, apt).
	hack/install-node-deps.sh
	hack/build-node-bins.sh

.PHONY: run-local
run-local: rig-bins ## Main job: apiserver + Kafka broker + manager + samples, then print status and Kafka configs.
	go run ./hack/run-local --kafka-version $(KAFKA_VERSION)

##@ Test

.PHONY: test
test: rig-bins node-bins prom-bins verify ## Run every test: unit, CEL on a real apiserver, integration against real brokers and the end-to-end test on a real node (test/node, -tags nodee2e; root), in a shuffled order; prints the 20 slowest tests (SHUFFLE=seed replays an order).
	@mkdir -p $(TEST_TIMES); rm -f $(TEST_TIMES)/go-test.json $(TEST_TIMES)/alone.json
	@echo "shuffle seed: $(SHUFFLE) (replay this order: make test SHUFFLE=$(SHUFFLE))"
	@rc=0; \
	$(GOTESTSUM) --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile $(TEST_TIMES)/go-test.json -- -tags nodee2e $(GO_TEST_FLAGS) -skip '$(ALONE_TESTS)' $(TEST_PKGS) || rc=$$?; \
	$(GOTESTSUM) --format pkgname-and-test-fails --format-hide-empty-pkg --jsonfile $(TEST_TIMES)/alone.json -- $(GO_TEST_FLAGS) -run '$(ALONE_TESTS)' $(ALONE_PKGS) || rc=$$?; \
	go run ./hack/testtimes $(TEST_TIMES)/*.json; \
	exit $$rc

.PHONY: test-node
test-node: node-bins ## End to end on a real node (root): the chart's image and Pods run under a kubelet, the app's sidecar dead-letters (test/node, docs/node-rig.md).
	go test -tags nodee2e -count=1 -timeout 30m -v ./test/node/

.PHONY: test-fast
test-fast: ## The development loop (1½–2 minutes warm): unit tests, pure plan and status tables, fuzz seeds (-short everywhere), and the CEL rules on a real apiserver.
	go test -short -count=1 -shuffle=on ./...
	go test -count=1 -shuffle=on ./api/...

.PHONY: test-times
test-times: ## Per-package wall time and the 20 slowest tests of the last make test (TEST_TIMES); BEFORE=file.json adds an earlier run's column.
	@ls $(TEST_TIMES)/*.json >/dev/null 2>&1 || { echo "no go test -json files in $(TEST_TIMES): run make test first"; exit 1; }
	go run ./hack/testtimes $(if $(BEFORE),-before $(BEFORE)) $(TEST_TIMES)/*.json

.PHONY: test-unit
test-unit: ## Run only the tests that need no apiserver or broker.
	go test -short -count=1 ./...

.PHONY: fuzz
fuzz: ## Fuzz the ShareQueue plan for 60s.
	go test -short -run XXX -fuzz FuzzPlanQueue -fuzztime 60s ./controllers/

SOAK_DURATION ?= 30m
SOAK_SEED ?=
SOAK_TIMEOUT ?= 3h

.PHONY: soak
soak: rig-bins ## Chaos soak (docs/soak.md): 3+1 brokers, apiserver, manager, 300 queues, traffic, seeded faults for SOAK_DURATION; SOAK_SEED replays a run (empty: random, printed first).
	go test -tags soak -count=1 -timeout $(SOAK_TIMEOUT) -v -run '^TestSoak$$' ./test/soak/ -args -soak.duration=$(SOAK_DURATION) $(if $(SOAK_SEED),-soak.seed=$(SOAK_SEED))

##@ Benchmark

BENCH_N ?= 100,1000,10000
BENCH_PATHS ?= batched,naive,sharded
BENCH_SHARDS ?= 2
BENCH_ARGS ?=

.PHONY: bench
bench: rig-bins ## Time to Ready, Kafka requests, apiserver writes, no-op resync, RSS and CPU for BENCH_N queues: batched, naive, and BENCH_SHARDS shard managers (per-manager RSS) (BENCH_ARGS="-profile DIR" for pprof).
	go run ./hack/bench -n $(BENCH_N) -paths $(BENCH_PATHS) -shards $(BENCH_SHARDS) $(BENCH_ARGS)

BENCH_REPUBLISHER_N ?= 20000

.PHONY: bench-republisher
bench-republisher: rig-bins ## Republisher sidecar (accept, dead-letter) beside a direct franz-go share consumer, Kafka's ShareConsumerPerformance and a producer: records/s and ratios (BENCH_REPUBLISHER_ARGS="-partitions 6 -members 8 -batch 500 -broker-prop k=v -group-prop k=v").
	go run ./hack/bench-republisher -n $(BENCH_REPUBLISHER_N) $(BENCH_REPUBLISHER_ARGS)

##@ Helm

HELM := go tool -modfile=hack/tools/go.mod helm

.PHONY: helm-lint
helm-lint: ## Lint and render both charts (helm from the Go module proxy, pinned in hack/tools/go.mod).
	$(HELM) lint --strict charts/kafka-queue-operator-crds
	$(HELM) lint --strict charts/kafka-queue-operator --set kafka.bootstrapServers={kafka:9092}
	$(HELM) template kqo-crds charts/kafka-queue-operator-crds --kube-version 1.37.2 >/dev/null
	$(HELM) template kqo charts/kafka-queue-operator --kube-version 1.37.2 --set kafka.bootstrapServers={kafka:9092} >/dev/null

##@ Build

.PHONY: build
build: ## Build the manager, republisher and kqctl binaries into bin/ with VERSION linked in (bin/kubectl-kq is the kubectl plugin, bin/kubectl_complete-kq its completion).
	CGO_ENABLED=0 go build -trimpath -ldflags="$(VERSION_LDFLAGS)" -o bin/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -ldflags="$(VERSION_LDFLAGS)" -o bin/republisher ./cmd/republisher
	CGO_ENABLED=0 go build -trimpath -ldflags="$(VERSION_LDFLAGS)" -o bin/kqctl ./cmd/kqctl
	ln -sf kqctl bin/kubectl-kq
	ln -sf kqctl bin/kubectl_complete-kq

.PHONY: release
release: ## Build a release's artifacts into dist/ (VERSION=vX.Y.Z): both charts packaged, the image tarball and its digest, kubectl-kq archives for linux and darwin on amd64 and arm64 (with the LICENSE), the krew manifest filled, checksums.txt. Uploads nothing (docs/install.md).
	go run ./hack/release -o dist -version $(VERSION) -commit $(COMMIT)

.PHONY: image-tar
image-tar: ## Build the image (tag $(IMG)) and the test node's pause and queueapp images as tarballs in bin/images, without Docker; ctr -n k8s.io images import loads them.
	go run ./hack/build-image -o bin/images -tag $(IMG)

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .
