// Package scaler serves KEDA's external scaler API (externalscaler.ExternalScaler, gRPC) from
// the depth poller's last round: a ScaledObject trigger of type external (or external-push)
// names a ShareQueue, and KEDA scales its consumers on the queue's backlog. No call sends a
// Kafka request; every answer is what the poller read at most one --depth-interval ago.
package scaler

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler/externalscaler"
)

// The scaler metadata keys of a ScaledObject's external trigger (besides KEDA's own
// scalerAddress and TLS keys).
const (
	// MetaShareQueue names the ShareQueue (required).
	MetaShareQueue = "shareQueue"
	// MetaNamespace is the ShareQueue's namespace: the ScaledObject's (the default; another
	// is refused).
	MetaNamespace = "namespace"
	// MetaBacklogPerReplica is the backlog one replica should carry: the HPA's average-value
	// target (default DefaultBacklogPerReplica).
	MetaBacklogPerReplica = "backlogPerReplica"
	// MetaActivationBacklog is the backlog above which the queue is active (KEDA scales from
	// zero to one and back at it; default 0: any record).
	MetaActivationBacklog = "activationBacklog"
)

// The bounds of the metadata numbers: KEDA turns a target into an integer of thousandths
// (below minTarget it is 0) and into int64 (above maxMetadataNumber it overflows).
const (
	minTarget         = 0.001
	maxMetadataNumber = 1e15
)

// DefaultBacklogPerReplica is backlogPerReplica when the trigger does not set it.
const DefaultBacklogPerReplica = 100

// Reading is one queue's figures from one round of the depth poller.
type Reading struct {
	// Backlog is the records not yet acknowledged (kafka.QueueDepth.Backlog); a partial sum
	// when Unread > 0.
	Backlog int64
	// Unread is the number of partitions left out of the sum.
	Unread int
	// Err says why nothing could be read (then Backlog means nothing).
	Err string
	// At is when the round read it.
	At time.Time
}

// Store holds the depth poller's last round, by queue, for the scaler to answer from.
type Store struct {
	mu     sync.RWMutex
	queues map[types.NamespacedName]Reading
	// changed is closed and replaced when a round is stored (StreamIsActive waits on it).
	changed chan struct{}
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{queues: map[types.NamespacedName]Reading{}, changed: make(chan struct{})}
}

// Replace stores a round: queues read in it replace the last round's; queues not in it (gone,
// paused, moved to another shard) are forgotten.
func (s *Store) Replace(round map[types.NamespacedName]Reading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues = round
	close(s.changed)
	s.changed = make(chan struct{})
}

// get returns a queue's reading and a channel closed at the next round.
func (s *Store) get(k types.NamespacedName) (Reading, bool, <-chan struct{}) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.queues[k]
	return r, ok, s.changed
}

// Server implements KEDA's ExternalScaler service over a Store.
type Server struct {
	externalscaler.UnimplementedExternalScalerServer
	Store *Store
	// MaxAge is how old a reading may be before the scaler refuses to answer from it (a
	// poller that stopped reading: the leader lost its connection to the cluster, or
	// stopped). Three depth intervals is a sensible value.
	MaxAge time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Explain, when set, says why the poller has no reading of a queue (from the manager's
	// cache: absent, paused, being deleted, ...), for the NotFound answer.
	Explain func(ctx context.Context, q types.NamespacedName) string
}

// trigger is a ScaledObject trigger's metadata, parsed.
type trigger struct {
	queue             types.NamespacedName
	backlogPerReplica float64
	activation        float64
}

// parseTrigger reads a ScaledObjectRef's scaler metadata. Errors name the key, the value and
// what it must be. Pure.
func parseTrigger(ref *externalscaler.ScaledObjectRef) (trigger, error) {
	md := ref.GetScalerMetadata()
	t := trigger{backlogPerReplica: DefaultBacklogPerReplica}
	if err := misspeltKeys(md); err != nil {
		return t, err
	}
	t.queue.Name = strings.TrimSpace(md[MetaShareQueue])
	if t.queue.Name == "" {
		return t, fmt.Errorf("scaler metadata %s is missing: set it to the ShareQueue's name", MetaShareQueue)
	}
	// KEDA sets the ref's namespace (the ScaledObject's), not its author: a ScaledObject
	// reads only the queues of its own namespace, as Kubernetes tenancy has it.
	t.queue.Namespace = ref.GetNamespace()
	if ns := strings.TrimSpace(md[MetaNamespace]); ns != "" && t.queue.Namespace != "" && ns != t.queue.Namespace {
		return t, fmt.Errorf("scaler metadata %s %q: a ScaledObject in namespace %s may scale on the ShareQueues of its own namespace only", MetaNamespace, ns, t.queue.Namespace)
	} else if t.queue.Namespace == "" {
		t.queue.Namespace = ns
	}
	if t.queue.Namespace == "" {
		return t, fmt.Errorf("scaler metadata %s is missing and the ScaledObjectRef has no namespace: set %s", MetaNamespace, MetaNamespace)
	}
	num := func(key string, positive bool, dst *float64) error {
		v, ok := md[key]
		if !ok || strings.TrimSpace(v) == "" {
			return nil
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > maxMetadataNumber || positive && f < minTarget {
			want := fmt.Sprintf("a number from 0 to %g", float64(maxMetadataNumber))
			if positive {
				want = fmt.Sprintf("a number from %g to %g (KEDA passes targets in thousandths)", minTarget, float64(maxMetadataNumber))
			}
			return fmt.Errorf("scaler metadata %s %q: must be %s", key, v, want)
		}
		*dst = f
		return nil
	}
	if err := num(MetaBacklogPerReplica, true, &t.backlogPerReplica); err != nil {
		return t, err
	}
	if err := num(MetaActivationBacklog, false, &t.activation); err != nil {
		return t, err
	}
	return t, nil
}

// MetricName is the metric a trigger reports for a queue (KEDA prefixes it with the trigger's
// index, e.g. s0-sharequeue-shop-orders-backlog).
func MetricName(q types.NamespacedName) string {
	return "sharequeue-" + q.Namespace + "-" + q.Name + "-backlog"
}

// reading is the queue's last reading, or the gRPC error that says why there is none usable.
func (s *Server) reading(ctx context.Context, t trigger) (Reading, <-chan struct{}, error) {
	r, ok, next := s.Store.get(t.queue)
	if !ok {
		why := "it does not exist, has no topic and group in its status yet, is paused (kafkaqueues.io/reconcile), is being deleted, or belongs to another manager or shard (point scalerAddress at that one's scaler)"
		if s.Explain != nil {
			if w := s.Explain(ctx, t.queue); w != "" {
				why = w
			}
		}
		return r, next, status.Errorf(codes.NotFound, "ShareQueue %s is not read by this manager's depth poller: %s", t.queue, why)
	}
	if r.Err != "" {
		return r, next, status.Errorf(codes.Unavailable, "ShareQueue %s: depth not read at %s: %s", t.queue, r.At.UTC().Format(time.RFC3339), r.Err)
	}
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	if r.Unread > 0 {
		// A partial sum could read 0 while records wait on the partitions not read: KEDA
		// would scale the consumers to zero in the middle of a broker incident.
		return r, next, status.Errorf(codes.Unavailable, "ShareQueue %s: %d partition(s) could not be read at %s (their leader or the group coordinator did not answer): the backlog is not known", t.queue, r.Unread, r.At.UTC().Format(time.RFC3339))
	}
	if age := now().Sub(r.At); s.MaxAge > 0 && age > s.MaxAge {
		return r, next, status.Errorf(codes.Unavailable, "ShareQueue %s: depth last read %s ago (at %s), more than %s: the depth poller has not read it since (its rounds are slow: a cluster answering slowly, or the status writes; or it stopped: this manager lost its leadership, or the queue's KafkaCluster is unreachable)", t.queue, age.Truncate(time.Second), r.At.UTC().Format(time.RFC3339), s.MaxAge)
	}
	return r, next, nil
}

func (t trigger) active(r Reading) bool { return float64(r.Backlog) > t.activation }

// IsActive says whether the queue's backlog is above activationBacklog.
func (s *Server) IsActive(ctx context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.IsActiveResponse, error) {
	t, err := parseTrigger(ref)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	r, _, err := s.reading(ctx, t)
	if err != nil {
		return nil, err
	}
	return &externalscaler.IsActiveResponse{Result: t.active(r)}, nil
}

// StreamIsActive sends the queue's activity when the stream opens and whenever a round
// changes it (trigger type external-push); the stream ends with the error when the queue
// cannot be read, so KEDA reconnects and reports it.
func (s *Server) StreamIsActive(ref *externalscaler.ScaledObjectRef, stream externalscaler.ExternalScaler_StreamIsActiveServer) error {
	t, err := parseTrigger(ref)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	var last *bool
	for {
		r, next, err := s.reading(stream.Context(), t)
		if err != nil {
			return err
		}
		if a := t.active(r); last == nil || *last != a {
			if err := stream.Send(&externalscaler.IsActiveResponse{Result: a}); err != nil {
				return err
			}
			last = &a
		}
		var stale <-chan time.Time
		if s.MaxAge > 0 {
			// Re-check when the reading would go stale even if no round comes.
			stale = time.After(s.MaxAge - time.Since(r.At) + time.Second)
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-next:
		case <-stale:
		}
	}
}

// GetMetricSpec is the trigger's one metric and its per-replica target.
func (s *Server) GetMetricSpec(_ context.Context, ref *externalscaler.ScaledObjectRef) (*externalscaler.GetMetricSpecResponse, error) {
	t, err := parseTrigger(ref)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &externalscaler.GetMetricSpecResponse{MetricSpecs: []*externalscaler.MetricSpec{{
		MetricName:      MetricName(t.queue),
		TargetSize:      int64(math.Ceil(t.backlogPerReplica)),
		TargetSizeFloat: t.backlogPerReplica,
	}}}, nil
}

// GetMetrics is the queue's backlog from the last round.
func (s *Server) GetMetrics(ctx context.Context, req *externalscaler.GetMetricsRequest) (*externalscaler.GetMetricsResponse, error) {
	t, err := parseTrigger(req.GetScaledObjectRef())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	r, _, err := s.reading(ctx, t)
	if err != nil {
		return nil, err
	}
	return &externalscaler.GetMetricsResponse{MetricValues: []*externalscaler.MetricValue{{
		MetricName:       MetricName(t.queue),
		MetricValue:      r.Backlog,
		MetricValueFloat: float64(r.Backlog),
	}}}, nil
}

// kedaKeys are the external trigger's own metadata keys, which KEDA passes on with the rest
// (keda-docs, scalers/external-push).
var kedaKeys = []string{"scalerAddress", "caCert", "tlsCertFile", "tlsClientCert", "tlsClientKey", "unsafeSsl", "enableTLS"}

// misspeltKeys refuses a metadata key that is not one this scaler or KEDA reads but is one
// of this scaler's keys misspelt (another case, or two edits away): left alone, a
// "backlogPerReplicas: 5" would scale on the default of 100 without a word. Other keys are
// left alone, as KEDA passes the whole metadata map.
func misspeltKeys(md map[string]string) error {
	ours := []string{MetaShareQueue, MetaNamespace, MetaBacklogPerReplica, MetaActivationBacklog}
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if slices.Contains(ours, k) || slices.Contains(kedaKeys, k) {
			continue
		}
		if base, ok := strings.CutSuffix(k, "FromEnv"); ok && slices.Contains(ours, base) {
			// KEDA resolves ...FromEnv for its built-in scalers only; an external scaler gets
			// the key as written and cannot see the workload's environment.
			return fmt.Errorf("scaler metadata %s: this scaler cannot read the workload's environment (KEDA passes the key as written to an external scaler): set %s itself", k, base)
		}
		for _, o := range ours {
			if strings.EqualFold(k, o) || editDistance(strings.ToLower(k), strings.ToLower(o)) <= 2 {
				return fmt.Errorf("scaler metadata %s is not a key this scaler reads: did you mean %s?", k, o)
			}
		}
	}
	return nil
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
