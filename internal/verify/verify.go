// Package verify is the truth checker: it reads every KafkaCluster, ShareQueue and
// DeadLetterRoute and compares each claim their status makes with what Kafka holds right now
// (issue 20). A claim that Kafka contradicts is a Finding. `kqctl verify` and the soak test
// (test/soak) both run it.
package verify

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options select what Check reads.
type Options struct {
	// Namespace limits ShareQueues and DeadLetterRoutes to one namespace ("" = all). The
	// KafkaClusters they reference are checked wherever they are.
	Namespace string
	// Receive makes the usability check of a Ready queue also fetch once as a share
	// consumer of the queue's group (and release what it got), not only join it.
	Receive bool
	// Timeout bounds each Kafka request (default 10s).
	Timeout time.Duration
	// Bootstrap overrides a KafkaCluster's spec.bootstrapServers, keyed "namespace/name"
	// (for running outside the cluster network).
	Bootstrap map[string][]string
}

// Finding is one false claim: a status says Claim and Kafka shows Observed.
type Finding struct {
	// Kind, Namespace and Name identify the object whose status made the claim.
	Kind, Namespace, Name string
	// Field is the status field or condition that made the claim, e.g. "status.partitions"
	// or "conditions[Ready]".
	Field string
	// Claim is what the status says; Observed is what Kafka holds now.
	Claim, Observed string
}

func (f Finding) String() string {
	return fmt.Sprintf("%s %s/%s %s: status says %s, Kafka has %s", f.Kind, f.Namespace, f.Name, f.Field, f.Claim, f.Observed)
}

// Report is one Check's outcome.
type Report struct {
	// Objects is how many objects were read, Claims how many claims were compared.
	Objects, Claims int
	// Findings are the false claims; empty means every checked claim held.
	Findings []Finding
	// Unverifiable names claims that could not be compared (a cluster that did not answer),
	// with why. They are not findings.
	Unverifiable []string
}

// Check compares every status claim with Kafka. The error is for failures to read the
// Kubernetes API, not for false claims.
func Check(ctx context.Context, c client.Reader, opts Options) (Report, error) {
	return Report{}, errors.New("verify: not implemented yet")
}
