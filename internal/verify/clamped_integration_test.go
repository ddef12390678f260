package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// A lease stored while the brokers allowed it and then left above a bound a broker restart
// narrowed: the brokers clamp it at run time (KIP-1240), and the operator shows the clamped
// value with source Clamped without rewriting the group. That claim is true: the checker
// compares it with the stored override clamped to the live bounds, not with the stored
// override (the soak's bound-change fault found the checker calling it false). A Clamped
// value that is not the clamp of what Kafka holds is still a finding.
func TestCheckClampedFollowsABoundNarrowedAtRuntime(t *testing.T) {
	// Not parallel: it stops its manager and writes false statuses; in shuffled parallel runs
	// something rewrote them before the check read them (see docs/testing.md).
	s := startSuite(t)
	ns := s.namespace(t)
	stop := s.startManager(t, ns)
	ctx := ctxFor(t)
	const bound = "group.share.max.record.lock.duration.ms"
	k, err := rig.StartKafka(context.Background(), rig.KafkaOptions{BrokerProps: map[string]string{bound: "60000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	kc := cluster(ns, "narrowed", k.BootstrapServers())
	q := queue(ns, "lease", "narrowed", kqv1.DeliverySpec{LockDuration: &metav1.Duration{Duration: 50 * time.Second}})
	s.createReady(t, kc, q)
	if err := k.RestartNode(ctx, k.Nodes[0], map[string]string{bound: "45000"}); err != nil {
		t.Fatal(err)
	}
	rig.Eventually(t, 120*time.Second, func() string {
		if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
			return err.Error()
		}
		if e := q.Status.Effective; e == nil || e.LockDuration == nil || e.LockDuration.Source != kqv1.SourceClamped || e.LockDuration.Value != "45s" {
			return "the queue does not show the lease clamped to 45s yet: " + strings.TrimSpace(ptrText(q.Status.Effective))
		}
		return ""
	})
	// The stored override is still 50 s: the operator did not rewrite it.
	live, why := groupLockMs(ctx, k.BootstrapServers(), q.Status.GroupID)
	if why != "" || live != "50000" {
		t.Fatalf("group %s share.record.lock.duration.ms = %q (%s), want the stored 50000", q.Status.GroupID, live, why)
	}
	rep, err := Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		t.Errorf("bound narrowed to 45 s, lease shown clamped: %s", f)
	}
	if len(rep.Unverifiable) > 0 {
		t.Errorf("unverifiable: %v", rep.Unverifiable)
	}

	// A Clamped value that is not what the brokers apply is false.
	stop()
	if err := s.k8s.Get(ctx, client.ObjectKeyFromObject(q), q); err != nil {
		t.Fatal(err)
	}
	q.Status.Effective.LockDuration = &kqv1.EffectiveValue{Config: "share.record.lock.duration.ms", Value: "40s", Source: kqv1.SourceClamped}
	if err := s.k8s.Status().Update(ctx, q); err != nil {
		t.Fatal(err)
	}
	rep, err = Check(ctx, s.k8s, Options{Namespace: ns, SkipJoin: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.String())
	}
	if len(rep.Findings) != 1 || rep.Findings[0].Field != "status.effective.lockDuration" ||
		!strings.Contains(rep.Findings[0].Claim, "40000") || !strings.Contains(rep.Findings[0].Observed, "45000 applied") {
		t.Fatalf("a Clamped 40s against an applied 45 s: findings %v", got)
	}
}

func ptrText(e *kqv1.EffectiveDelivery) string {
	if e == nil || e.LockDuration == nil {
		return "no lockDuration"
	}
	return e.LockDuration.Value + " (" + string(e.LockDuration.Source) + ")"
}

// groupLockMs reads the group's stored share.record.lock.duration.ms on bootstrap.
func groupLockMs(ctx context.Context, bootstrap []string, group string) (string, string) {
	cl, err := kafka.NewClient(kafka.Config{BootstrapServers: bootstrap, ClientID: "test-clamped"})
	if err != nil {
		return "", err.Error()
	}
	defer cl.Close()
	rs, err := readGroups(ctx, cl, 10*time.Second, []string{group})
	if err != nil {
		return "", err.Error()
	}
	e, ok := rs[group].Configs["share.record.lock.duration.ms"]
	if !ok || e.Source != kafka.ConfigSourceGroup {
		return "", "no override"
	}
	return e.Value, ""
}
