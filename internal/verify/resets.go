package verify

import (
	"context"
	"fmt"
	"strings"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// resetClaims says whether an OffsetReset claims offsets: Complete, not being deleted, with a
// group and topic and at least one partition read back after the apply.
func resetClaims(or *kqv1.OffsetReset) bool {
	if !or.DeletionTimestamp.IsZero() || or.Status.Phase != kqv1.OffsetResetComplete || or.Status.GroupID == "" || or.Status.Topic == "" {
		return false
	}
	for _, p := range or.Status.Partitions {
		if p.After != nil {
			return true
		}
	}
	return false
}

// resolvedAt orders resets of one group: when the target was resolved, else when created.
func resolvedAt(or *kqv1.OffsetReset) int64 {
	if t := or.Status.ResolvedAt; t != nil {
		return t.UnixNano()
	}
	return or.CreationTimestamp.UnixNano()
}

// checkResets checks the newest Complete OffsetReset of each group on w's cluster (older ones
// are superseded): every partition it read back holds state in the group now, at the offset
// read back or later (issue 30, case 2: a reset said Complete while the group held no state
// for any partition, and a consumer got the records the reset had skipped). A reset older than
// its queue (the group may have been deleted and made again since), or resolved on a topic id
// other than the topic's now (deleted and made again since), claims nothing here.
func (ck *checker) checkResets(ctx context.Context, cl *kafka.Client, w *world) {
	newest := map[string]*kqv1.OffsetReset{}
	for _, k := range sortedKeys(w.resets) {
		or := w.resets[k]
		q := w.allQueues[or.Namespace+"/"+or.Spec.QueueRef.Name]
		if q == nil || q.Status.GroupID != or.Status.GroupID || or.CreationTimestamp.Before(&q.CreationTimestamp) {
			continue
		}
		if cur := newest[or.Status.GroupID]; cur == nil || resolvedAt(or) > resolvedAt(cur) {
			newest[or.Status.GroupID] = or
		}
	}
	for _, g := range sortedKeys(newest) {
		or := newest[g]
		rctx, cancel := context.WithTimeout(ctx, ck.opts.Timeout)
		if or.Status.TopicID != "" {
			// Resolved on a topic since deleted and made again (by the queue, or by hand): its
			// offsets were in that log, and the group's state in this one says nothing of them.
			ts, err := cl.DescribeTopics(rctx, or.Status.Topic)
			if err == nil {
				err = ts[or.Status.Topic].Err
			}
			if err != nil && !kafka.IsUnknownTopic(err) {
				cancel()
				ck.unverifiable(KindOffsetReset, or.Namespace, or.Name, "describing topic %s: %v", or.Status.Topic, err)
				continue
			}
			if err != nil || ts[or.Status.Topic].ID != or.Status.TopicID {
				// Gone, or another topic of that name.
				cancel()
				continue
			}
		}
		starts, err := cl.ShareStartOffsets(rctx, g, or.Status.Topic)
		cancel()
		if err != nil {
			ck.unverifiable(KindOffsetReset, or.Namespace, or.Name, "reading share group %s's start offsets: %v", g, err)
			continue
		}
		var says, wrong []string
		for _, p := range or.Status.Partitions {
			if p.After == nil {
				continue
			}
			says = append(says, fmt.Sprintf("p%d at %d", p.Partition, *p.After))
			switch start, ok := starts[p.Partition]; {
			case !ok:
				wrong = append(wrong, fmt.Sprintf("p%d: no state in the group", p.Partition))
			case start < *p.After:
				wrong = append(wrong, fmt.Sprintf("p%d: starts at %d", p.Partition, start))
			}
		}
		has := "every partition at or past it"
		if len(wrong) > 0 {
			has = strings.Join(wrong, ", ")
		}
		ck.claim(KindOffsetReset, or.Namespace, or.Name, "status.partitions[].after",
			"Complete: group "+g+" "+strings.Join(says, ", "), has, len(wrong) == 0)
	}
}
