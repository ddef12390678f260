package controllers

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/test/rig"
)

// badCase is one file of test/badinput: a bad manifest (or a base and a bad update) and what
// must happen to it, from its header comments:
//
//	# expect: rejected | rejected-update | condition <Kind> <Type>=<Status>/<Reason>
//	# message: <text the error or condition message must contain>   (repeatable)
type badCase struct {
	file     string
	expect   string
	kind     string
	condType string
	status   metav1.ConditionStatus
	reason   string
	messages []string
	docs     []*unstructured.Unstructured
}

var condExpect = regexp.MustCompile(`^condition (\w+) (\w+)=(\w+)/(\w+)$`)

func loadBadInput(t *testing.T) []badCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(rig.RepoRoot(), "test", "badinput", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []badCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		c := badCase{file: filepath.Base(f)}
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "# expect: "); ok {
				c.expect = v
			}
			if v, ok := strings.CutPrefix(line, "# message: "); ok {
				c.messages = append(c.messages, v)
			}
		}
		if m := condExpect.FindStringSubmatch(c.expect); m != nil {
			c.expect, c.kind, c.condType, c.status, c.reason = "condition", m[1], m[2], metav1.ConditionStatus(m[3]), m[4]
		}
		if c.docs, err = rig.DecodeManifests(data); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if c.expect == "" || len(c.messages) == 0 || len(c.docs) == 0 {
			t.Fatalf("%s: needs '# expect:', '# message:' and a manifest", c.file)
		}
		out = append(out, c)
	}
	return out
}

// The bad-input corpus: every manifest is either refused at admission with a message naming
// the field, or accepted and given a condition naming the field and the reason. None may
// panic the manager, make a Kafka write when refused at admission, or delete anything.
func TestBadInputCorpus(t *testing.T) {
	// Not parallel: it counts the suite manager's Kafka writes, which parallel tests would add to.
	r := startRig(t)
	cases := loadBadInput(t)
	if len(cases) < 40 {
		t.Fatalf("corpus has %d manifests, want at least 40", len(cases))
	}
	ns := r.newNamespace(t)
	r.newCluster(t, ns)
	ctx := ctxFor(t)
	topicsBefore := r.listTopics(t)
	panicsBefore := reconcilePanics()
	snapBefore := r.counter.Snapshot()
	writesBefore := kafka.Writes(snapBefore)

	// Refused creates first: nothing reaches Kafka. The rejected-update cases then create
	// valid bases, which the operator rightly reconciles (topics, claims), so they come after
	// the count.
	var conditionCases, updateCases []badCase
	for _, c := range cases {
		switch c.expect {
		case "rejected":
			t.Run(c.file, func(t *testing.T) {
				obj := c.docs[0].DeepCopy()
				obj.SetNamespace(ns)
				err := r.k8s.Create(ctx, obj)
				assertRejected(t, err, c.messages)
			})
		case "rejected-update":
			updateCases = append(updateCases, c)
		case "condition":
			conditionCases = append(conditionCases, c)
		default:
			t.Fatalf("%s: unknown expectation %q", c.file, c.expect)
		}
	}
	if w := kafka.Writes(r.counter.Snapshot()) - writesBefore; w != 0 {
		t.Errorf("manifests refused at admission led to %d Kafka write request(s): %v", w, kafka.Diff(snapBefore, r.counter.Snapshot()))
	}
	for _, c := range updateCases {
		t.Run(c.file, func(t *testing.T) {
			base := c.docs[0].DeepCopy()
			base.SetNamespace(ns)
			if err := r.k8s.Create(ctx, base); err != nil {
				t.Fatalf("base refused: %v", err)
			}
			// A merge patch carries no resourceVersion, so the controller's own status
			// writes cannot turn the expected rejection into a conflict.
			upd := c.docs[1].DeepCopy()
			upd.SetNamespace(ns)
			assertRejected(t, r.k8s.Patch(ctx, upd, client.Merge), c.messages)
		})
	}

	for _, c := range conditionCases {
		obj := c.docs[0].DeepCopy()
		obj.SetNamespace(ns)
		if err := r.k8s.Create(ctx, obj); err != nil {
			t.Errorf("%s: refused at admission, want a condition: %v", c.file, err)
		}
	}
	for _, c := range conditionCases {
		t.Run(c.file, func(t *testing.T) {
			key := client.ObjectKey{Namespace: ns, Name: c.docs[0].GetName()}
			eventually(t, 60*time.Second, func() string {
				var conds []metav1.Condition
				switch c.kind {
				case "ShareQueue":
					var o kqv1.ShareQueue
					if err := r.k8s.Get(ctx, key, &o); err != nil {
						return err.Error()
					}
					conds = o.Status.Conditions
				case "KafkaCluster":
					var o kqv1.KafkaCluster
					if err := r.k8s.Get(ctx, key, &o); err != nil {
						return err.Error()
					}
					conds = o.Status.Conditions
				case "OffsetReset":
					var o kqv1.OffsetReset
					if err := r.k8s.Get(ctx, key, &o); err != nil {
						return err.Error()
					}
					conds = o.Status.Conditions
				case "DeadLetterRedrive":
					var o kqv1.DeadLetterRedrive
					if err := r.k8s.Get(ctx, key, &o); err != nil {
						return err.Error()
					}
					conds = o.Status.Conditions
				default:
					t.Fatalf("%s: condition cases of kind %s are not supported", c.file, c.kind)
				}
				cond := findCondition(conds, c.condType)
				if cond == nil || cond.Status != c.status || cond.Reason != c.reason {
					return fmt.Sprintf("want %s=%s/%s, have %+v", c.condType, c.status, c.reason, cond)
				}
				for _, m := range c.messages {
					if !strings.Contains(cond.Message, m) {
						return fmt.Sprintf("%s message %q does not contain %q", c.condType, cond.Message, m)
					}
				}
				return ""
			})
		})
	}

	// Nothing deleted, nothing panicked, no bad value reached Kafka.
	after := r.listTopics(t)
	for name := range topicsBefore {
		if !after[name] {
			t.Errorf("topic %s disappeared while the corpus was applied", name)
		}
	}
	for _, bad := range []string{"bad-unknown-config", "bad-config-value", "bad-rf", "bad-adopt", "bad-mode"} {
		if after[bad] {
			t.Errorf("topic %s was created from a bad manifest", bad)
		}
	}
	groups := []kafka.ResourceKey{}
	for _, g := range []string{"bad-lock", "bad-attempts", "bad-inflight", "bad-session", "bad-heartbeat"} {
		groups = append(groups, kafka.ResourceKey{Type: kafka.GroupResource, Name: g})
	}
	cfgs, err := r.admin.DescribeConfigs(ctx, groups)
	if err != nil {
		t.Fatal(err)
	}
	for k, rc := range cfgs {
		for name, e := range rc.Configs {
			if e.IsOverride() {
				t.Errorf("%s: out-of-bounds value reached Kafka: %s=%s", k, name, e.Value)
			}
		}
	}
	if p := reconcilePanics() - panicsBefore; p != 0 {
		t.Errorf("%v reconcile panic(s) while applying the corpus", p)
	}
}

func assertRejected(t *testing.T, err error, messages []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want a rejection naming %q", messages)
	}
	for _, m := range messages {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("rejection %q does not contain %q", err.Error(), m)
		}
	}
}

func (r *testRig) listTopics(t *testing.T) map[string]bool {
	t.Helper()
	ts, err := r.admin.ListTopicNames(ctxFor(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range ts {
		out[n] = true
	}
	return out
}

// reconcilePanics reads controller-runtime's controller_runtime_reconcile_panics_total.
func reconcilePanics() float64 {
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		return -1
	}
	var total float64
	for _, mf := range mfs {
		if mf.GetName() == "controller_runtime_reconcile_panics_total" {
			for _, m := range mf.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
