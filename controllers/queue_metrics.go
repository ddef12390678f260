package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// queueMetrics is the per-queue metric series (depth, members, dead letters) as one
// prometheus.Collector: a compact record per queue, turned into const metrics at scrape
// time (the kube-state-metrics pattern). A GaugeVec keeps a label-pair slice, a gauge and
// a hash entry per series; at 10,000 queues × 6 series that was about 25 MB of the
// manager's live heap (docs/capacity-planning.md). The metric names, help texts, labels
// and values are those of the GaugeVecs it replaces (docs/autoscaling.md,
// docs/operating.md). A series that is absent (never set, or cleared) is not emitted; a
// queue's record is dropped when it has no series left. Safe for concurrent use.
type queueMetrics struct {
	backlog, lag, oldestAge, unread, lastRead, unreadSince, members, retention, deadLetters *prometheus.Desc

	mu     sync.Mutex
	queues map[queueMetricsKey]queueFigures
	routes map[routeMetricsKey]deadLetterFigure
	// round numbers the depth poller's rounds (beginPoll): the poller marks what it reads
	// in a round and sweepPolls removes the depth series of the rest, so the poller keeps
	// no set of its own of the queues it exported.
	round uint64
}

// queueMetricsKey is a ShareQueue's namespace and name.
type queueMetricsKey struct{ namespace, name string }

// routeMetricsKey is a DeadLetterRoute's namespace, name and queue (its series' labels).
type routeMetricsKey struct{ namespace, name, queue string }

// queueFigures is one queue's last values; each has* flag says whether its series exist.
type queueFigures struct {
	hasDepth    bool    // backlog (and its deprecated lag), oldest age, unread partitions
	backlog     float64 // records
	oldestAge   float64 // seconds
	unread      float64 // partitions
	hasLastRead bool
	lastRead    float64 // Unix seconds
	// hasUnreadSince: the poller tried and failed to read the queue, and has not read it once
	// since this process started; unreadSince is its first failed try (Unix seconds).
	hasUnreadSince bool
	unreadSince    float64
	hasMembers     bool
	members        float64
	// hasRetention: the topic's retention.ms was read and is finite.
	hasRetention bool
	retention    float64 // seconds
	polled       uint64  // the last depth poller round that read the queue
}

// deadLetterFigure is a DeadLetterRoute's record count and the last round that read it.
type deadLetterFigure struct {
	records float64
	polled  uint64
}

func (f *queueFigures) empty() bool {
	return !f.hasDepth && !f.hasLastRead && !f.hasUnreadSince && !f.hasMembers && !f.hasRetention
}

func newQueueMetrics() *queueMetrics {
	qn := []string{"namespace", "name"}
	return &queueMetrics{
		backlog: prometheus.NewDesc("kafkaqueues_queue_backlog_records",
			"Records of a ShareQueue not yet acknowledged, visible or in flight, over every partition (SQS ApproximateNumberOfMessagesVisible + NotVisible).", qn, nil),
		// The old name of backlog, kept with the same value (deprecated).
		lag: prometheus.NewDesc("kafkaqueues_queue_lag_records",
			"Deprecated: the same as kafkaqueues_queue_backlog_records.", qn, nil),
		oldestAge: prometheus.NewDesc("kafkaqueues_queue_oldest_record_age_seconds",
			"Age of the oldest unacknowledged record of a ShareQueue at the last read, 0 with no backlog (SQS ApproximateAgeOfOldestMessage); over the partitions whose oldest record could be dated (a lower bound) while kafkaqueues_queue_depth_unread_partitions > 0.", qn, nil),
		unread: prometheus.NewDesc("kafkaqueues_queue_depth_unread_partitions",
			"Partitions of a ShareQueue left out of the last read: their backlog, or the time of their oldest record, could not be read (0: backlog and age are complete).", qn, nil),
		lastRead: prometheus.NewDesc("kafkaqueues_queue_depth_last_read_timestamp_seconds",
			"Unix time of the last successful depth read of a ShareQueue.", qn, nil),
		unreadSince: prometheus.NewDesc("kafkaqueues_queue_depth_unread_since_timestamp_seconds",
			"Unix time of the first failed depth read of a ShareQueue that this manager has not read once since it started (absent once a read succeeds; then see kafkaqueues_queue_depth_last_read_timestamp_seconds).", qn, nil),
		members: prometheus.NewDesc("kafkaqueues_queue_members",
			"Consumers in a ShareQueue's share group.", qn, nil),
		retention: prometheus.NewDesc("kafkaqueues_queue_topic_retention_seconds",
			"The retention.ms of a ShareQueue's topic in seconds, as its last reconcile read it (absent when unlimited, -1): records older are deleted whether or not the group acknowledged them.", qn, nil),
		deadLetters: prometheus.NewDesc("kafkaqueues_deadletter_records",
			"Records in a DeadLetterRoute's topic (end minus log start offset over its partitions; SQS ApproximateNumberOfMessagesVisible of the DLQ).",
			[]string{"namespace", "name", "queue"}, nil),
		queues: map[queueMetricsKey]queueFigures{},
		routes: map[routeMetricsKey]deadLetterFigure{},
	}
}

// update applies fn to the queue's record (created when missing) and drops the record when
// it has no series left.
func (m *queueMetrics) update(namespace, name string, fn func(*queueFigures)) {
	k := queueMetricsKey{namespace, name}
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.queues[k]
	fn(&f)
	if f.empty() {
		delete(m.queues, k)
	} else {
		m.queues[k] = f
	}
}

// beginPoll starts a depth poller round and returns its number for setDepth, clearDepth,
// setDeadLetters and sweepPolls.
func (m *queueMetrics) beginPoll() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.round++
	return m.round
}

// setDepth sets a queue's backlog (records, also as the deprecated lag), oldest record age
// (seconds), unread partitions and last read time (Unix seconds), read in poller round.
func (m *queueMetrics) setDepth(round uint64, namespace, name string, backlog, oldestAge, unread, lastRead float64) {
	m.update(namespace, name, func(f *queueFigures) {
		f.hasDepth, f.backlog, f.oldestAge, f.unread = true, backlog, oldestAge, unread
		f.hasLastRead, f.lastRead = true, lastRead
		f.hasUnreadSince = false
		f.polled = round
	})
}

// clearDepth removes a queue's series that must not outlive a read (backlog, lag, oldest
// age, unread partitions) when poller round could not read it, at now (Unix seconds); its
// last read time stays, and a queue never read since the start gets its unread-since time.
// now 0 says it was not tried (it does not own its topic or group): its read times go too.
func (m *queueMetrics) clearDepth(round uint64, namespace, name string, now float64) {
	m.update(namespace, name, func(f *queueFigures) {
		f.hasDepth, f.polled = false, round
		if now == 0 {
			// Not tried (a Conflict): no read time either, or a frozen last read would say
			// the backlog is not being read (a breaker's finding on issue 34).
			f.hasLastRead, f.hasUnreadSince = false, false
		}
		if now > 0 && !f.hasLastRead && !f.hasUnreadSince {
			f.hasUnreadSince, f.unreadSince = true, now
		}
	})
}

// sweepPolls removes the depth series and last read time of every queue, and the record
// count of every route, that poller round did not mark (deleted, moved to a cluster that
// was not listed, no longer polled); member counts stay.
func (m *queueMetrics) sweepPolls(round uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, f := range m.queues {
		if f.polled == round || !f.hasDepth && !f.hasLastRead && !f.hasUnreadSince {
			continue
		}
		f.hasDepth, f.hasLastRead, f.hasUnreadSince = false, false, false
		if f.empty() {
			delete(m.queues, k)
		} else {
			m.queues[k] = f
		}
	}
	for k, f := range m.routes {
		if f.polled != round {
			delete(m.routes, k)
		}
	}
}

// setMembers sets the member count of a queue's share group.
func (m *queueMetrics) setMembers(namespace, name string, members float64) {
	m.update(namespace, name, func(f *queueFigures) { f.hasMembers, f.members = true, members })
}

// clearMembers removes a queue's member count (its group could not be read).
func (m *queueMetrics) clearMembers(namespace, name string) {
	m.update(namespace, name, func(f *queueFigures) { f.hasMembers = false })
}

// setRetention sets a queue's topic retention (seconds); a negative value (retention.ms -1,
// unlimited) removes the series.
func (m *queueMetrics) setRetention(namespace, name string, seconds float64) {
	m.update(namespace, name, func(f *queueFigures) { f.hasRetention, f.retention = seconds >= 0, seconds })
}

// clearRetention removes a queue's topic retention (its topic's configs were not read).
func (m *queueMetrics) clearRetention(namespace, name string) {
	m.update(namespace, name, func(f *queueFigures) { f.hasRetention = false })
}

// forgetQueue removes every series of a queue (deleted, or no longer this manager's).
func (m *queueMetrics) forgetQueue(namespace, name string) {
	m.mu.Lock()
	delete(m.queues, queueMetricsKey{namespace, name})
	m.mu.Unlock()
}

// setDeadLetters sets the record count of a DeadLetterRoute's topic, read in poller round.
func (m *queueMetrics) setDeadLetters(round uint64, namespace, name, queue string, records float64) {
	m.mu.Lock()
	m.routes[routeMetricsKey{namespace, name, queue}] = deadLetterFigure{records, round}
	m.mu.Unlock()
}

// clearDeadLetters removes a DeadLetterRoute's record count.
func (m *queueMetrics) clearDeadLetters(namespace, name, queue string) {
	m.mu.Lock()
	delete(m.routes, routeMetricsKey{namespace, name, queue})
	m.mu.Unlock()
}

// Describe sends the eight metrics' descriptors.
func (m *queueMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.backlog, m.lag, m.oldestAge, m.unread, m.lastRead, m.unreadSince, m.members, m.retention, m.deadLetters} {
		ch <- d
	}
}

// Collect sends every present series with its current value. The lock is held while
// sending: a scrape of 10,000 queues is a few milliseconds of sending into the
// registry's channel, and setters wait that long at most.
func (m *queueMetrics) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, f := range m.queues {
		if f.hasDepth {
			gauge(m.backlog, f.backlog, k.namespace, k.name)
			gauge(m.lag, f.backlog, k.namespace, k.name)
			gauge(m.oldestAge, f.oldestAge, k.namespace, k.name)
			gauge(m.unread, f.unread, k.namespace, k.name)
		}
		if f.hasLastRead {
			gauge(m.lastRead, f.lastRead, k.namespace, k.name)
		}
		if f.hasUnreadSince {
			gauge(m.unreadSince, f.unreadSince, k.namespace, k.name)
		}
		if f.hasMembers {
			gauge(m.members, f.members, k.namespace, k.name)
		}
		if f.hasRetention {
			gauge(m.retention, f.retention, k.namespace, k.name)
		}
	}
	for k, f := range m.routes {
		gauge(m.deadLetters, f.records, k.namespace, k.name, k.queue)
	}
}
