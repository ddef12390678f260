package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// AlterPartitionAssignments moves the given partitions of topic to new replica lists (the
// first broker is the preferred leader). The brokers copy data in the background; use
// ReassigningPartitions to see when they are done. Item errors are joined into one error
// naming each partition.
func (c *Client) AlterPartitionAssignments(ctx context.Context, topic string, assignments map[int32][]int32) (err_ error) {
	start := time.Now()
	defer func() { c.record("AlterPartitionAssignments", start, err_) }()
	if len(assignments) == 0 {
		return nil
	}
	req := kadm.AlterPartitionAssignmentsReq{}
	for p, replicas := range assignments {
		req.Assign(topic, p, replicas)
	}
	res, err := c.adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return wrap("AlterPartitionAssignments", "topic "+topic, err)
	}
	var errs []error
	res.Each(func(r kadm.AlterPartitionAssignmentsResponse) {
		if r.Err != nil {
			errs = append(errs, &Error{Op: "AlterPartitionAssignments", Resource: fmt.Sprintf("%s-%d", r.Topic, r.Partition), Err: r.Err, Message: r.ErrMessage})
		}
	})
	return errors.Join(errs...)
}

// ReassigningPartitions returns the partitions of topic with a reassignment in progress
// (ListPartitionReassignments).
func (c *Client) ReassigningPartitions(ctx context.Context, topic string) (map[int32]bool, error) {
	res, err := c.adm.ListPartitionReassignments(ctx, nil)
	if err != nil {
		return nil, wrap("ListPartitionReassignments", "", err)
	}
	out := map[int32]bool{}
	for p := range res[topic] {
		out[p] = true
	}
	return out, nil
}
