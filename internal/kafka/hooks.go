package kafka

import (
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// WriteAPIs are the request keys that change cluster state. A reconcile whose plan is empty
// must send none of them. Produce is the operator's claims records (Claims).
var WriteAPIs = map[string]bool{
	"Produce":      true,
	"CreateTopics": true, "DeleteTopics": true, "CreatePartitions": true,
	"AlterConfigs": true, "IncrementalAlterConfigs": true, "DeleteGroups": true,
	"UpdateFeatures": true, "AlterPartitionAssignments": true, "DeleteRecords": true,
}

// BrokerWriteFunc observes one request written to a broker: the Kafka API name (e.g.
// "CreateTopics", from the request key) and the write's error (nil when it was written).
type BrokerWriteFunc func(api string, err error)

// brokerWriteHook adapts BrokerWriteFuncs to franz-go's broker-write hook.
type brokerWriteHook []BrokerWriteFunc

var _ kgo.HookBrokerWrite = brokerWriteHook(nil)

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (h brokerWriteHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	api := kmsg.NameForKey(key)
	for _, f := range h {
		f(api, err)
	}
}

// RequestCounter counts requests written to brokers, by API name. Pass its Observe as a
// BrokerWriteFunc (NewPool, Config.BrokerWrites); tests and benchmarks use it to prove a no-op
// reconcile writes nothing.
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// Observe counts one request written (a failed write is not counted). It is a BrokerWriteFunc.
func (rc *RequestCounter) Observe(api string, err error) {
	if err != nil {
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.counts == nil {
		rc.counts = map[string]int{}
	}
	rc.counts[api]++
}

// Snapshot returns a copy of the counts.
func (rc *RequestCounter) Snapshot() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make(map[string]int, len(rc.counts))
	for k, v := range rc.counts {
		out[k] = v
	}
	return out
}

// Writes sums the counts of WriteAPIs in a snapshot.
func Writes(snapshot map[string]int) int {
	n := 0
	for k, v := range snapshot {
		if WriteAPIs[k] {
			n += v
		}
	}
	return n
}

// Diff returns after - before per API, dropping zeros, with sorted keys for printing.
func Diff(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// SortedKeys returns m's keys sorted.
func SortedKeys(m map[string]int) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
