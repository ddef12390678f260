package controllers

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The per-queue collector must scrape exactly as the GaugeVecs it replaced: same names,
// help, labels and values; a cleared series absent; a forgotten queue gone entirely.
func TestQueueMetricsCollector(t *testing.T) {
	m := newQueueMetrics()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m); err != nil {
		t.Fatal(err)
	}
	expect := func(step, text string, names ...string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(text), names...); err != nil {
			t.Errorf("%s: %v", step, err)
		}
	}
	const (
		backlogHead = "# HELP kafkaqueues_queue_backlog_records Records of a ShareQueue not yet acknowledged, visible or in flight, over every partition (SQS ApproximateNumberOfMessagesVisible + NotVisible).\n# TYPE kafkaqueues_queue_backlog_records gauge\n"
		lagHead     = "# HELP kafkaqueues_queue_lag_records Deprecated: the same as kafkaqueues_queue_backlog_records.\n# TYPE kafkaqueues_queue_lag_records gauge\n"
		ageHead     = "# HELP kafkaqueues_queue_oldest_record_age_seconds Age of the oldest unacknowledged record of a ShareQueue at the last read, 0 with no backlog (SQS ApproximateAgeOfOldestMessage); over the partitions whose oldest record could be dated (a lower bound) while kafkaqueues_queue_depth_unread_partitions > 0.\n# TYPE kafkaqueues_queue_oldest_record_age_seconds gauge\n"
		unreadHead  = "# HELP kafkaqueues_queue_depth_unread_partitions Partitions of a ShareQueue left out of the last read: their backlog, or the time of their oldest record, could not be read (0: backlog and age are complete).\n# TYPE kafkaqueues_queue_depth_unread_partitions gauge\n"
		readHead    = "# HELP kafkaqueues_queue_depth_last_read_timestamp_seconds Unix time of the last successful depth read of a ShareQueue.\n# TYPE kafkaqueues_queue_depth_last_read_timestamp_seconds gauge\n"
		sinceHead   = "# HELP kafkaqueues_queue_depth_unread_since_timestamp_seconds Unix time of the first failed depth read of a ShareQueue that this manager has not read once since it started (absent once a read succeeds; then see kafkaqueues_queue_depth_last_read_timestamp_seconds).\n# TYPE kafkaqueues_queue_depth_unread_since_timestamp_seconds gauge\n"
		membersHead = "# HELP kafkaqueues_queue_members Consumers in a ShareQueue's share group.\n# TYPE kafkaqueues_queue_members gauge\n"
		deadHead    = "# HELP kafkaqueues_deadletter_records Records in a DeadLetterRoute's topic (end minus log start offset over its partitions; SQS ApproximateNumberOfMessagesVisible of the DLQ).\n# TYPE kafkaqueues_deadletter_records gauge\n"
	)
	all := []string{"kafkaqueues_queue_backlog_records", "kafkaqueues_queue_lag_records", "kafkaqueues_queue_oldest_record_age_seconds",
		"kafkaqueues_queue_depth_unread_partitions", "kafkaqueues_queue_depth_last_read_timestamp_seconds", "kafkaqueues_queue_members", "kafkaqueues_deadletter_records"}

	expect("nothing set", "", all...)

	r1 := m.beginPoll()

	m.setDepth(r1, "team-a", "orders", 42, 7.5, 1, 1_700_000_000)
	m.setDepth(r1, "team-b", "orders", 0, 0, 0, 1_700_000_001)
	m.setMembers("team-a", "orders", 3)
	m.setDeadLetters(r1, "team-a", "orders-dlq", "orders", 5)
	expect("set",
		backlogHead+`kafkaqueues_queue_backlog_records{name="orders",namespace="team-a"} 42
kafkaqueues_queue_backlog_records{name="orders",namespace="team-b"} 0
`+lagHead+`kafkaqueues_queue_lag_records{name="orders",namespace="team-a"} 42
kafkaqueues_queue_lag_records{name="orders",namespace="team-b"} 0
`+ageHead+`kafkaqueues_queue_oldest_record_age_seconds{name="orders",namespace="team-a"} 7.5
kafkaqueues_queue_oldest_record_age_seconds{name="orders",namespace="team-b"} 0
`+unreadHead+`kafkaqueues_queue_depth_unread_partitions{name="orders",namespace="team-a"} 1
kafkaqueues_queue_depth_unread_partitions{name="orders",namespace="team-b"} 0
`+readHead+`kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-a"} 1.7e+09
kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-b"} 1.700000001e+09
`+membersHead+`kafkaqueues_queue_members{name="orders",namespace="team-a"} 3
`+deadHead+`kafkaqueues_deadletter_records{name="orders-dlq",namespace="team-a",queue="orders"} 5
`, all...)

	// Updated in place: one series per queue, the new value.
	m.setDepth(r1, "team-a", "orders", 40, 2, 0, 1_700_000_030)
	m.setMembers("team-a", "orders", 4)
	m.setDeadLetters(r1, "team-a", "orders-dlq", "orders", 6)
	expect("updated",
		backlogHead+`kafkaqueues_queue_backlog_records{name="orders",namespace="team-a"} 40
kafkaqueues_queue_backlog_records{name="orders",namespace="team-b"} 0
`+membersHead+`kafkaqueues_queue_members{name="orders",namespace="team-a"} 4
`+deadHead+`kafkaqueues_deadletter_records{name="orders-dlq",namespace="team-a",queue="orders"} 6
`, "kafkaqueues_queue_backlog_records", "kafkaqueues_queue_members", "kafkaqueues_deadletter_records")

	// A failed read: backlog, lag, age and unread absent, never the old value; the last
	// read time and the member count stay.
	m.clearDepth(r1, "team-a", "orders", 1_700_000_060)
	m.clearDeadLetters("team-a", "orders-dlq", "orders")
	expect("read failed",
		backlogHead+`kafkaqueues_queue_backlog_records{name="orders",namespace="team-b"} 0
`+lagHead+`kafkaqueues_queue_lag_records{name="orders",namespace="team-b"} 0
`+ageHead+`kafkaqueues_queue_oldest_record_age_seconds{name="orders",namespace="team-b"} 0
`+unreadHead+`kafkaqueues_queue_depth_unread_partitions{name="orders",namespace="team-b"} 0
`+readHead+`kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-a"} 1.70000003e+09
kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-b"} 1.700000001e+09
`+membersHead+`kafkaqueues_queue_members{name="orders",namespace="team-a"} 4
`, all...)

	// The group could not be read: no member count.
	m.clearMembers("team-a", "orders")
	expect("members cleared", "", "kafkaqueues_queue_members")

	// The next poller round reads team-a/orders (its read fails again) and not team-b/orders
	// (deleted) nor the route: team-b's depth series and last read time go, team-a's last
	// read time stays.
	m.setDeadLetters(r1, "team-a", "orders-dlq", "orders", 6)
	round := m.beginPoll()
	m.clearDepth(round, "team-a", "orders", 1_700_000_090)
	m.sweepPolls(round)
	expect("depth swept",
		readHead+`kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-a"} 1.70000003e+09
`, all...)

	// A queue not read once since the start (a breaker's finding on issue 34: it had no
	// series, so the stale-read alert could never fire for it): the first failed read's time,
	// kept through later failures, gone with the first successful read.
	m.clearDepth(round, "team-c", "orders", 1_700_000_100)
	round = m.beginPoll()
	m.clearDepth(round, "team-a", "orders", 1_700_000_120)
	m.clearDepth(round, "team-c", "orders", 1_700_000_130)
	m.sweepPolls(round)
	expect("never read", readHead+`kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-a"} 1.70000003e+09
`+sinceHead+`kafkaqueues_queue_depth_unread_since_timestamp_seconds{name="orders",namespace="team-c"} 1.7000001e+09
`, append(all, "kafkaqueues_queue_depth_unread_since_timestamp_seconds")...)
	m.setDepth(round, "team-c", "orders", 1, 1, 0, 1_700_000_140)
	expect("read at last", "", "kafkaqueues_queue_depth_unread_since_timestamp_seconds")
	// Then not tried (it went into Conflict over its group): no read time is left to go stale.
	m.clearDepth(round, "team-c", "orders", 0)
	expect("not tried", readHead+`kafkaqueues_queue_depth_last_read_timestamp_seconds{name="orders",namespace="team-a"} 1.70000003e+09
`, "kafkaqueues_queue_depth_last_read_timestamp_seconds", "kafkaqueues_queue_depth_unread_since_timestamp_seconds")
	m.forgetQueue("team-c", "orders")

	// Deleted: every series of the queue goes, and its record with them.
	m.setMembers("team-a", "orders", 1)
	m.forgetQueue("team-a", "orders")
	expect("deleted", "", all...)
	if n := len(m.queues) + len(m.routes); n != 0 {
		t.Errorf("records left after every series was removed: %d", n)
	}
	if n := testutil.CollectAndCount(m); n != 0 {
		t.Errorf("series after every queue was deleted: %d", n)
	}
}
