// Package sqsimport converts an Amazon SQS queue's attributes (the JSON printed by
// `aws sqs get-queue-attributes --attribute-names All`) into a ShareQueue and, when the queue
// has a redrive policy, a DeadLetterRoute. Every attribute is either mapped, with its
// conversion, or listed as not representable with the reason.
//
// Sources: SQS limits and defaults from the Amazon SQS Developer Guide (visibility timeout
// 0 s – 12 h, default 30 s; maxReceiveCount 1 – 1000; retention 60 s – 14 d, default 4 d;
// message size up to 256 KiB classic / 1 MiB); Kafka share-group configs from KIP-932 and
// KIP-1240 (share.record.lock.duration.ms ≥ 1000, share.delivery.count.limit ≥ 2).
package sqsimport

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/delivery"
)

// Attributes is the get-queue-attributes output: {"Attributes": {"Name": "value", ...}}, or
// the inner map alone.
type Attributes map[string]string

// Parse reads get-queue-attributes JSON (with or without the "Attributes" wrapper).
func Parse(data []byte) (Attributes, error) {
	var wrapped struct {
		Attributes map[string]any `json:"Attributes"`
	}
	if err := json.Unmarshal(data, &wrapped); err != nil {
		return nil, fmt.Errorf("parsing SQS attributes: %w", err)
	}
	raw := wrapped.Attributes
	if raw == nil {
		if err := json.Unmarshal(data, &raw); err != nil {
			return nil, fmt.Errorf("parsing SQS attributes: %w", err)
		}
	}
	out := Attributes{}
	for k, v := range raw {
		switch x := v.(type) {
		case string:
			out[k] = x
		case nil:
		default:
			b, _ := json.Marshal(x)
			out[k] = string(b)
		}
	}
	return out, nil
}

// Mapping is one attribute's fate.
type Mapping struct {
	Attribute string
	Value     string
	// Field is the ShareQueue/DeadLetterRoute field it became ("" when not representable).
	Field string
	// Note explains the conversion, or why the attribute cannot be represented.
	Note string
}

// Result is the converted queue.
type Result struct {
	Queue  *kqv1.ShareQueue
	Route  *kqv1.DeadLetterRoute // nil without a redrive policy
	Mapped []Mapping
	// NotRepresentable lists attributes with no ShareQueue equivalent, and why.
	NotRepresentable []Mapping
	// Warnings are values that were changed to fit Kafka's hard floors.
	Warnings []string
}

// Options name the generated resources.
type Options struct {
	Name      string // ShareQueue name; default: from QueueArn, lower-cased and sanitised
	Namespace string
	Cluster   string // KafkaCluster name
	// DeadLetterPrefix is the brokers' errors.deadletterqueue.topic.name.prefix (KIP-1191),
	// which a dead-letter topic must start with for BrokerNative mode; default "dlq."
	// (kqv1.DefaultDeadLetterTopicPrefix). The DLQ's SQS name gets it, so the route works in
	// either mode (Auto picks BrokerNative on share.version 2 clusters).
	DeadLetterPrefix string
}

// runtimeOnly are read-only statistics and identifiers with nothing to configure.
var runtimeOnly = map[string]string{
	"ApproximateNumberOfMessages":           "a runtime statistic; see ShareQueue status.depth.backlog and kafkaqueues_queue_backlog_records",
	"ApproximateNumberOfMessagesNotVisible": "a runtime statistic (in-flight records)",
	"ApproximateNumberOfMessagesDelayed":    "a runtime statistic",
	"CreatedTimestamp":                      "an SQS timestamp",
	"LastModifiedTimestamp":                 "an SQS timestamp",
	"QueueArn":                              "an SQS identifier; used only to name the ShareQueue",
}

// notRepresentable are settings with no Kafka share-group equivalent.
var notRepresentable = map[string]string{
	"DelaySeconds":                  "Kafka share groups deliver records as soon as they are written; there is no per-queue delivery delay",
	"ReceiveMessageWaitTimeSeconds": "long polling is a consumer setting in Kafka (fetch.max.wait.ms on the share consumer), not a queue setting",
	"FifoQueue":                     "share groups hand records of one partition to many consumers at once and give no ordering guarantee; use a consumer group for ordered processing",
	"ContentBasedDeduplication":     "Kafka has no broker-side deduplication by content; use idempotent producers and idempotent consumers",
	"DeduplicationScope":            "FIFO deduplication has no share-group equivalent",
	"FifoThroughputLimit":           "FIFO throughput modes have no share-group equivalent",
	"KmsMasterKeyId":                "encryption at rest is a broker/storage setting in Kafka, not a queue setting",
	"KmsDataKeyReusePeriodSeconds":  "encryption at rest is a broker/storage setting in Kafka, not a queue setting",
	"SqsManagedSseEnabled":          "encryption at rest is a broker/storage setting in Kafka, not a queue setting",
	"Policy":                        "access control is Kafka ACLs on the topic and group, outside the ShareQueue",
	"RedriveAllowPolicy":            "Kafka has no policy restricting which queues may use a topic as their dead-letter target",
}

// Convert maps SQS attributes to a ShareQueue (and DeadLetterRoute).
func Convert(attrs Attributes, opts Options) (*Result, error) {
	name := opts.Name
	if name == "" {
		name = nameFromArn(attrs["QueueArn"])
	}
	if name == "" {
		return nil, fmt.Errorf("no queue name: pass --name or include QueueArn")
	}
	cluster := opts.Cluster
	if cluster == "" {
		cluster = "kafka"
	}
	q := &kqv1.ShareQueue{
		TypeMeta:   metav1.TypeMeta{APIVersion: kqv1.GroupVersion.String(), Kind: "ShareQueue"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opts.Namespace},
		Spec:       kqv1.ShareQueueSpec{ClusterRef: kqv1.ClusterReference{Name: cluster}, Topic: kqv1.QueueTopicSpec{Partitions: 6}},
	}
	res := &Result{Queue: q}
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := attrs[k]
		switch k {
		case "VisibilityTimeout":
			secs, err := sqsInt(k, v, 0, 43200) // SQS: 0 s – 12 h
			if err != nil {
				return nil, err
			}
			d := time.Duration(secs) * time.Second
			note := fmt.Sprintf("%d s → share.record.lock.duration.ms=%d; SQS caps a message's total visibility at 12 h, while Kafka lets consumers renew a lock without limit (renewAcknowledge)", secs, secs*1000)
			if d < time.Second {
				d = time.Second
				res.Warnings = append(res.Warnings, fmt.Sprintf("VisibilityTimeout %d s is below Kafka's 1 s floor for share.record.lock.duration.ms; wrote 1s", secs))
			}
			q.Spec.Delivery.LockDuration = &metav1.Duration{Duration: d}
			res.Mapped = append(res.Mapped, Mapping{k, v, "spec.delivery.lockDuration", note})
		case "MessageRetentionPeriod":
			secs, err := sqsInt(k, v, 60, 1209600) // SQS: 60 s – 14 d
			if err != nil {
				return nil, err
			}
			setTopicConfig(q, "retention.ms", strconv.FormatInt(int64(secs)*1000, 10))
			res.Mapped = append(res.Mapped, Mapping{k, v, "spec.topic.config[retention.ms]",
				fmt.Sprintf("%d s → retention.ms=%d; Kafka keeps records for the whole period whether or not they were acknowledged", secs, secs*1000)})
		case "MaximumMessageSize":
			setTopicConfig(q, "max.message.bytes", v)
			res.Mapped = append(res.Mapped, Mapping{k, v, "spec.topic.config[max.message.bytes]",
				fmt.Sprintf("%s bytes → max.message.bytes=%s (a record batch limit; producers' max.request.size must allow it)", v, v)})
		case "RedrivePolicy":
			var rp struct {
				DeadLetterTargetArn string `json:"deadLetterTargetArn"`
				MaxReceiveCount     any    `json:"maxReceiveCount"`
			}
			if err := json.Unmarshal([]byte(v), &rp); err != nil {
				return nil, fmt.Errorf("RedrivePolicy %q: %w", v, err)
			}
			if rp.MaxReceiveCount == nil {
				return nil, fmt.Errorf("RedrivePolicy %s has no maxReceiveCount", v)
			}
			count, err := sqsInt("RedrivePolicy.maxReceiveCount", strings.Trim(fmt.Sprint(rp.MaxReceiveCount), `"`), 1, 1000) // SQS: 1 – 1000
			if err != nil {
				return nil, err
			}
			attempts := int32(count)
			if attempts < 2 {
				attempts = 2
				res.Warnings = append(res.Warnings, fmt.Sprintf("maxReceiveCount %d is below Kafka's floor of 2 for share.delivery.count.limit; wrote maxDeliveryAttempts: 2 (one redelivery more than SQS)", count))
			}
			q.Spec.Delivery.MaxDeliveryAttempts = &attempts
			res.Mapped = append(res.Mapped, Mapping{k + ".maxReceiveCount", strconv.Itoa(count), "spec.delivery.maxDeliveryAttempts",
				fmt.Sprintf("%d → share.delivery.count.limit=%d; Kafka counts every acquisition (a lock that lapses counts), SQS's ApproximateReceiveCount is approximate; brokers bound the limit (group.share.max.delivery.count.limit, 10 by default)", count, attempts)})
			dlqName := nameFromArn(rp.DeadLetterTargetArn)
			if dlqName == "" {
				dlqName = name + "-dlq"
			}
			prefix := opts.DeadLetterPrefix
			if prefix == "" {
				prefix = kqv1.DefaultDeadLetterTopicPrefix
			}
			if !strings.HasPrefix(dlqName, prefix) {
				dlqName = prefix + dlqName
			}
			res.Route = &kqv1.DeadLetterRoute{
				TypeMeta:   metav1.TypeMeta{APIVersion: kqv1.GroupVersion.String(), Kind: "DeadLetterRoute"},
				ObjectMeta: metav1.ObjectMeta{Name: name + "-dlq", Namespace: opts.Namespace},
				Spec: kqv1.DeadLetterRouteSpec{
					QueueRef: kqv1.QueueReference{Name: name}, Mode: kqv1.DeadLetterModeAuto, CopyRecord: true,
					Topic: kqv1.DeadLetterTopicSpec{Name: dlqName, Partitions: 1},
				},
			}
			res.Mapped = append(res.Mapped, Mapping{k + ".deadLetterTargetArn", rp.DeadLetterTargetArn, "DeadLetterRoute " + name + "-dlq",
				fmt.Sprintf("dead records go to topic %s with the whole record (copyRecord: true, as SQS moves the message itself); the SQS name gets the brokers' dead-letter prefix %q, which BrokerNative mode requires (errors.deadletterqueue.topic.name.prefix, KIP-1191)", dlqName, prefix)})
		default:
			if why, ok := notRepresentable[k]; ok {
				res.NotRepresentable = append(res.NotRepresentable, Mapping{Attribute: k, Value: v, Note: why})
			} else if why, ok := runtimeOnly[k]; ok {
				res.NotRepresentable = append(res.NotRepresentable, Mapping{Attribute: k, Value: v, Note: why})
			} else {
				res.NotRepresentable = append(res.NotRepresentable, Mapping{Attribute: k, Value: v, Note: "unknown SQS attribute; not converted"})
			}
		}
	}
	if attrs["FifoQueue"] == "true" {
		res.Warnings = append(res.Warnings, "this is a FIFO queue: a ShareQueue does not preserve order or deduplicate; check the consumers tolerate both")
	}
	return res, nil
}

// sqsInt parses an SQS integer attribute and checks it against SQS's own range, so a value SQS
// could never have had is refused instead of converted.
func sqsInt(attr, v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s %q is not an integer", attr, v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("%s %d is outside SQS's range %d–%d", attr, n, lo, hi)
	}
	return n, nil
}

func setTopicConfig(q *kqv1.ShareQueue, k, v string) {
	if q.Spec.Topic.Config == nil {
		q.Spec.Topic.Config = kqv1.TopicConfigs{}
	}
	q.Spec.Topic.Config[k] = v
}

// nameFromArn turns arn:aws:sqs:region:account:Orders-Queue.fifo into orders-queue-fifo.
func nameFromArn(arn string) string {
	if arn == "" {
		return ""
	}
	parts := strings.Split(arn, ":")
	n := strings.ToLower(parts[len(parts)-1])
	var b strings.Builder
	for _, r := range n {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// Check compares the converted values with a cluster's bounds (KafkaCluster status), with the
// ShareQueue controller's own table and rule (internal/delivery: BoundViolations), and
// returns one line per value the brokers would refuse, saying what to change.
func Check(res *Result, bounds *kqv1.ShareBounds) []string {
	if bounds == nil {
		return []string{"the KafkaCluster reports no share bounds yet (not connected?)"}
	}
	var out []string
	for _, v := range delivery.BoundViolations(&res.Queue.Spec.Delivery, *bounds) {
		if v.Above {
			out = append(out, fmt.Sprintf("%s=%d%s is above the brokers' maximum (%s %d): lower it to %d, set boundsPolicy: Clamp, or raise the broker bound", v.Field, v.Value, v.Unit, v.BrokerConfig, v.Bound, v.Bound))
		} else {
			out = append(out, fmt.Sprintf("%s=%d%s is below the brokers' minimum (%s %d): raise it to at least %d or ask for a lower broker bound", v.Field, v.Value, v.Unit, v.BrokerConfig, v.Bound, v.Bound))
		}
	}
	return out
}
