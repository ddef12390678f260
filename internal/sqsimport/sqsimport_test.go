package sqsimport

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// Golden files: testdata/<case>.json → testdata/<case>.golden.yaml. Run with -update to
// rewrite them after an intended change, then review the diff.
func TestImportGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.json")
	if err != nil || len(inputs) < 6 {
		t.Fatalf("want at least 6 inputs, got %v (%v)", inputs, err)
	}
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			attrs, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(attrs, Options{Namespace: "apps", Cluster: "prod"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := Render(res)
			if err != nil {
				t.Fatal(err)
			}
			golden := strings.TrimSuffix(in, ".json") + ".golden.yaml"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/sqsimport -update)", err)
			}
			if d := cmp.Diff(string(want), string(got)); d != "" {
				t.Errorf("%s (-want +got):\n%s", golden, d)
			}
		})
	}
}

func TestImportConversions(t *testing.T) {
	load := func(name string) *Result {
		data, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Convert(attrs, Options{Cluster: "prod"})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	std := load("standard.json")
	q := std.Queue
	if q.Name != "orders" || q.Spec.Delivery.LockDuration.Duration.String() != "45s" || *q.Spec.Delivery.MaxDeliveryAttempts != 5 ||
		q.Spec.Topic.Config["retention.ms"] != "345600000" || q.Spec.Topic.Config["max.message.bytes"] != "262144" {
		t.Errorf("standard queue %+v", q.Spec)
	}
	if std.Route == nil || std.Route.Spec.Topic.Name != "dlq.orders-dlq" || std.Route.Spec.QueueRef.Name != "orders" {
		t.Errorf("standard route %+v", std.Route)
	}
	notRep := map[string]bool{}
	for _, m := range std.NotRepresentable {
		notRep[m.Attribute] = true
	}
	for _, a := range []string{"DelaySeconds", "ReceiveMessageWaitTimeSeconds", "SqsManagedSseEnabled"} {
		if !notRep[a] {
			t.Errorf("%s not listed as not representable", a)
		}
	}
	if r := load("no-redrive.json"); r.Route != nil || r.Queue.Spec.Delivery.MaxDeliveryAttempts != nil {
		t.Errorf("no redrive: route %v attempts %v", r.Route, r.Queue.Spec.Delivery.MaxDeliveryAttempts)
	}
	one := load("max-receive-1.json")
	if *one.Queue.Spec.Delivery.MaxDeliveryAttempts != 2 || one.Queue.Spec.Delivery.LockDuration.Duration.String() != "1s" || len(one.Warnings) != 2 {
		t.Errorf("maxReceiveCount 1: %+v warnings %v", one.Queue.Spec.Delivery, one.Warnings)
	}
	fifo := load("fifo.json")
	if *fifo.Queue.Spec.Delivery.MaxDeliveryAttempts != 3 || fifo.Queue.Name != "payments-fifo" || !strings.Contains(strings.Join(fifo.Warnings, " "), "FIFO") {
		t.Errorf("fifo: %+v %v", fifo.Queue.Spec.Delivery, fifo.Warnings)
	}

	// Against a 4.3+ cluster's default bounds, 1000 attempts and a 12 h lease are refused.
	min2, def5, max10 := int64(2), int64(5), int64(10)
	lmin, ldef, lmax := int64(15000), int64(30000), int64(60000)
	bounds := &kqv1.ShareBounds{DeliveryCountLimit: kqv1.Bound{Min: &min2, Default: &def5, Max: &max10}, RecordLockDurationMs: kqv1.Bound{Min: &lmin, Default: &ldef, Max: &lmax}}
	lines := Check(load("max-receive-1000.json"), bounds)
	if len(lines) != 1 || !strings.Contains(lines[0], "spec.delivery.maxDeliveryAttempts=1000 is above the brokers' maximum (group.share.max.delivery.count.limit 10)") {
		t.Errorf("check 1000: %q", lines)
	}
	lines = Check(load("visibility-12h.json"), bounds)
	if len(lines) != 1 || !strings.Contains(lines[0], "spec.delivery.lockDuration=43200000ms is above the brokers' maximum (group.share.max.record.lock.duration.ms 60000)") {
		t.Errorf("check 12h: %q", lines)
	}
	if lines := Check(one, bounds); len(lines) != 1 || !strings.Contains(lines[0], "below the brokers' minimum (group.share.min.record.lock.duration.ms 15000)") {
		t.Errorf("check 1s lease: %q", lines)
	}
	if lines := Check(std, bounds); len(lines) != 0 {
		t.Errorf("standard queue should fit: %q", lines)
	}
}

// Regression: huge or negative attributes overflowed into negative or wrapped values.
func TestImportRefusesValuesSQSCannotHave(t *testing.T) {
	for attrs, want := range map[string]string{
		`{"QueueArn":"a:b:c:d:e:q","MessageRetentionPeriod":"9223372036854775807"}`:           "MessageRetentionPeriod",
		`{"QueueArn":"a:b:c:d:e:q","MessageRetentionPeriod":"-5"}`:                            "outside SQS's range 60–1209600",
		`{"QueueArn":"a:b:c:d:e:q","VisibilityTimeout":"10000000000"}`:                        "VisibilityTimeout",
		`{"QueueArn":"a:b:c:d:e:q","VisibilityTimeout":"43201"}`:                              "outside SQS's range 0–43200",
		`{"QueueArn":"a:b:c:d:e:q","RedrivePolicy":"{\"maxReceiveCount\":\"100000000000\"}"}`: "maxReceiveCount",
		`{"QueueArn":"a:b:c:d:e:q","RedrivePolicy":"{}"}`:                                     "has no maxReceiveCount",
	} {
		a, err := Parse([]byte(attrs))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Convert(a, Options{}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", attrs, err, want)
		}
	}
}
