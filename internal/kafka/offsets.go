package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// OffsetQuery picks which offset ListPartitionOffsets resolves for each partition.
type OffsetQuery struct {
	// Earliest: the log start offset (ListOffsets timestamp -2).
	Earliest bool
	// Latest: the log end offset (ListOffsets timestamp -1).
	Latest bool
	// At, when neither Earliest nor Latest: the first offset whose record timestamp is at or
	// after At (ListOffsets by timestamp); a partition without one gives its end offset. An
	// instant before 1970 (e.g. byDuration 100y) is sent as 0: record timestamps are never
	// negative, and Kafka reads a negative ListOffsets timestamp as a command (-1 latest, -3
	// max timestamp; KIP-734/KIP-1005) or refuses it (UNSUPPORTED_VERSION, measured on 4.4).
	At time.Time
}

// ListPartitionOffsets resolves q for every partition of topic in one batched ListOffsets
// round (kadm: one request per partition leader) and returns offsets by partition. A missing
// topic is an error matching IsNotFound; a partition whose leader answered with an error
// makes the whole call fail (the caller must not act on a partial answer).
func (c *Client) ListPartitionOffsets(ctx context.Context, topic string, q OffsetQuery) (out_ map[int32]int64, err_ error) {
	start := time.Now()
	defer func() { c.record("ListOffsets", start, err_) }()
	var listed kadm.ListedOffsets
	var err error
	switch {
	case q.Earliest:
		listed, err = c.adm.ListStartOffsets(ctx, topic)
	case q.Latest:
		listed, err = c.adm.ListEndOffsets(ctx, topic)
	default:
		listed, err = c.adm.ListOffsetsAfterMilli(ctx, timestampQuery(q.At), topic)
	}
	if err != nil {
		return nil, wrap("ListOffsets", "topic "+topic, err)
	}
	ps, ok := listed[topic]
	if !ok || len(ps) == 0 {
		return nil, wrap("ListOffsets", "topic "+topic, kerr.UnknownTopicOrPartition)
	}
	out := make(map[int32]int64, len(ps))
	var errs []error
	for p, o := range ps {
		if p == -1 {
			// kadm's marker of a topic its metadata does not know (yet).
			return nil, wrap("ListOffsets", "topic "+topic, o.Err)
		}
		if o.Err != nil {
			errs = append(errs, wrap("ListOffsets", fmt.Sprintf("%s/%d", topic, p), o.Err))
			continue
		}
		out[p] = o.Offset
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// timestampQuery is the ListOffsets timestamp (ms since the epoch) of a query by time: at's,
// or 0 for an instant before 1970 (see OffsetQuery.At).
func timestampQuery(at time.Time) int64 { return max(at.UnixMilli(), 0) }

// ShareStartOffsets reads a share group's share-partition start offsets on topic
// (DescribeShareGroupOffsets, KIP-932; needs share.version >= 1). Partitions the group holds
// no state for are absent (Kafka 4.4 leaves them out of the answer; a start offset of -1 is
// treated the same). A group that does not exist gives an empty map. A partition error fails the
// call.
func (c *Client) ShareStartOffsets(ctx context.Context, group, topic string) (out_ map[int32]int64, err_ error) {
	start := time.Now()
	defer func() { c.record("DescribeShareGroupOffsets", start, err_) }()
	described, err := c.adm.DescribeShareGroupOffsets(ctx, group)
	if err != nil {
		return nil, wrap("DescribeShareGroupOffsets", "group "+group, err)
	}
	out := map[int32]int64{}
	d, ok := described[group]
	if !ok {
		return out, nil
	}
	if d.Err != nil {
		if errors.Is(d.Err, kerr.GroupIDNotFound) {
			return out, nil
		}
		return nil, wrap("DescribeShareGroupOffsets", "group "+group, d.Err)
	}
	var errs []error
	for p, o := range d.Offsets[topic] {
		switch {
		case o.Err != nil:
			errs = append(errs, wrap("DescribeShareGroupOffsets", fmt.Sprintf("group %s %s/%d", group, topic, p), o.Err))
		case o.StartOffset >= 0:
			out[p] = o.StartOffset
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ErrGroupNotEmpty is NON_EMPTY_GROUP (68): Kafka alters or deletes share-group offsets only
// while the group has no members (KIP-932).
var ErrGroupNotEmpty error = kerr.NonEmptyGroup

// AlterShareStartOffsets sets the share group's start offsets on topic to exactly offsets
// (AlterShareGroupOffsets, KIP-932; needs share.version >= 1 and ALTER on the group, READ on
// the topic). The group must be empty: otherwise the brokers refuse the whole request
// (errors.Is(err, ErrGroupNotEmpty)) and nothing is applied. Per-partition refusals are
// joined into the error, each naming its partition. Setting the same absolute offsets again
// is idempotent.
func (c *Client) AlterShareStartOffsets(ctx context.Context, group, topic string, offsets map[int32]int64) (err_ error) {
	start := time.Now()
	defer func() { c.record("AlterShareGroupOffsets", start, err_) }()
	os := kadm.Offsets{}
	for p, o := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: o, LeaderEpoch: -1})
	}
	resp, err := c.adm.AlterShareGroupOffsets(ctx, group, os)
	if err != nil {
		return wrap("AlterShareGroupOffsets", "group "+group, err)
	}
	var errs []error
	for _, p := range slices.Sorted(maps.Keys(offsets)) {
		if err, ok := resp.Lookup(topic, p); ok && err != nil {
			errs = append(errs, wrap("AlterShareGroupOffsets", fmt.Sprintf("group %s %s/%d", group, topic, p), err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for p := range offsets {
		if _, ok := resp.Lookup(topic, p); !ok {
			return &Error{Op: "AlterShareGroupOffsets", Resource: "group " + group, Err: errors.New("no answer for " + topic + "/" + strconv.Itoa(int(p)))}
		}
	}
	return nil
}
