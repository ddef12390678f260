package kafka

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ShareJoin is the outcome of JoinShareGroup: the assignment a new member got.
type ShareJoin struct {
	// MemberEpoch is the epoch the coordinator gave the member (> 0 once joined).
	MemberEpoch int32
	// Partitions is the number of partitions of the topic assigned to the member.
	Partitions int
	// Heartbeats is the number of ShareGroupHeartbeat requests sent before the assignment
	// (retries of a coordinator that was not available included; the leave not counted).
	Heartbeats int
}

// JoinShareGroup checks that group is a usable share group for topic without taking any
// record: it joins as a new member with ShareGroupHeartbeat (KIP-932; member epoch 0, a
// client-generated member id, subscribed to topic), heartbeats until the coordinator assigns
// it at least one partition or wait passes, then leaves (member epoch -1). It never sends
// ShareFetch, so no record is acquired and no delivery count moves.
//
// The error is the first failed heartbeat (a *Error whose Err is the Kafka error:
// UNSUPPORTED_VERSION with share.version 0; GROUP_ID_NOT_FOUND, message "Group <id> is not a
// share group.", when a consumer group holds the id (measured on 4.4.0); GROUP_MAX_SIZE_REACHED at
// group.share.max.size members, GROUP_AUTHORIZATION_FAILED, ...), or ErrNoAssignment when no
// partition was assigned within wait. The leave's own failure is not reported: the member
// expires after share.session.timeout.ms anyway.
func (c *Client) JoinShareGroup(ctx context.Context, group, topic string, wait time.Duration) (out_ ShareJoin, err_ error) {
	start := time.Now()
	defer func() { c.record("ShareGroupHeartbeat", start, err_) }()
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return ShareJoin{}, err
	}
	member := topicID(raw) // Kafka's Uuid text form, as its clients generate member ids
	deadline := time.Now().Add(wait)
	var out ShareJoin
	joined := false
	// coord, once a heartbeat was refused as sent to the wrong coordinator, is the broker
	// FindCoordinator names now, asked directly: franz-go routes a ShareGroupHeartbeat by its
	// cached coordinator and does not drop that cache on NOT_COORDINATOR (kgo v1.22.3), so a
	// long-lived client kept asking the old coordinator after the group moved (seen in the
	// soak: NOT_COORDINATOR for 2 minutes after a broker restart).
	coord := int32(-1)
	send := func(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest) (*kmsg.ShareGroupHeartbeatResponse, error) {
		if coord < 0 {
			return req.RequestWith(ctx, c.cl)
		}
		resp, err := c.cl.Broker(int(coord)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.(*kmsg.ShareGroupHeartbeatResponse), nil
	}
	defer func() {
		if !joined {
			return
		}
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		leave := kmsg.NewPtrShareGroupHeartbeatRequest()
		leave.GroupID, leave.MemberID, leave.MemberEpoch = group, member, -1
		_, _ = send(lctx, leave)
	}()
	for {
		req := kmsg.NewPtrShareGroupHeartbeatRequest()
		req.GroupID, req.MemberID, req.MemberEpoch = group, member, out.MemberEpoch
		if out.MemberEpoch == 0 {
			req.SubscribedTopicNames = []string{topic}
		}
		rctx, cancel := context.WithTimeout(ctx, time.Until(deadline)+5*time.Second)
		resp, err := send(rctx, req)
		cancel()
		out.Heartbeats++
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			// A coordinator moving or loading (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
			// COORDINATOR_LOAD_IN_PROGRESS, from FindCoordinator or the heartbeat itself) is
			// retried until wait passes, as a consumer would, at the coordinator the brokers
			// name now.
			if kerr.IsRetriable(err) && out.MemberEpoch == 0 && time.Now().Before(deadline) {
				if errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) {
					coord = c.groupCoordinator(ctx, group)
				}
				if !SleepCtx(ctx, 200*time.Millisecond) {
					return out, wrap("ShareGroupHeartbeat", "group "+group, ctx.Err())
				}
				continue
			}
			if resp != nil && resp.ErrorCode != 0 {
				return out, itemErr("ShareGroupHeartbeat", "group "+group, resp.ErrorCode, resp.ErrorMessage)
			}
			return out, wrap("ShareGroupHeartbeat", "group "+group, err)
		}
		joined = true
		out.MemberEpoch = resp.MemberEpoch
		if a := resp.Assignment; a != nil {
			out.Partitions = 0
			for _, tp := range a.TopicPartitions {
				out.Partitions += len(tp.Partitions)
			}
		}
		if out.Partitions > 0 {
			return out, nil
		}
		if time.Now().After(deadline) {
			return out, &Error{Op: "ShareGroupHeartbeat", Resource: "group " + group, Err: ErrNoAssignment,
				Message: fmt.Sprintf("no partition of topic %s assigned within %s (member epoch %d)", topic, wait, out.MemberEpoch)}
		}
		if !SleepCtx(ctx, 200*time.Millisecond) {
			return out, wrap("ShareGroupHeartbeat", "group "+group, ctx.Err())
		}
	}
}

// groupCoordinator asks a broker (FindCoordinator, not franz-go's cache) which broker
// coordinates group now; -1 when it cannot tell.
func (c *Client) groupCoordinator(ctx context.Context, group string) int32 {
	fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 0 // group
	req.CoordinatorKey = group
	req.CoordinatorKeys = []string{group}
	resp, err := req.RequestWith(fctx, c.cl)
	if err != nil {
		return -1
	}
	if len(resp.Coordinators) == 1 {
		if co := resp.Coordinators[0]; co.ErrorCode == 0 {
			return co.NodeID
		}
		return -1
	}
	if resp.ErrorCode == 0 && resp.NodeID >= 0 {
		return resp.NodeID
	}
	return -1
}

// SleepCtx waits d; false when ctx ended first (the caller then stops).
func SleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// ErrNoAssignment is JoinShareGroup's error when the coordinator accepted the member but
// assigned it no partition of the topic in time.
var ErrNoAssignment = errors.New("no partition assigned")

// ReceiveOnce joins group as a share consumer of topic (kgo.ShareGroup), polls once for at
// most wait, releases every record it acquired (AckRelease: each becomes available again
// with its delivery count one higher) and leaves. It returns how many records it acquired.
// Errors: joining or fetching failed (the poll's first error), or the release was not
// confirmed by the brokers. Zero records is not an error: the queue may be empty.
func (c *Client) ReceiveOnce(ctx context.Context, group, topic string, wait time.Duration) (int, error) {
	m, err := NewShareMember(c.cfg, group, topic, 100, wait)
	if err != nil {
		return 0, err
	}
	defer m.Close()
	pctx, cancel := context.WithTimeout(ctx, wait+5*time.Second)
	defer cancel()
	recs, err := m.Poll(pctx, 100)
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, err
	}
	for _, r := range recs {
		r.Ack(AckRelease)
	}
	if len(recs) > 0 {
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer fcancel()
		if err := m.Flush(fctx); err != nil {
			return len(recs), fmt.Errorf("releasing %d records of group %s: %w", len(recs), group, err)
		}
	}
	return len(recs), nil
}
