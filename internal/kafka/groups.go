package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ShareGroup is one share group's live state.
type ShareGroup struct {
	ID string
	// Exists is false when no consumer has ever joined (GROUP_ID_NOT_FOUND or state Dead).
	Exists bool
	// State is the group state as the coordinator reports it (Empty, Stable, ...).
	State string
	// Members is the number of members.
	Members int32
	// TotalLag sums the share-partition lag of the group's partitions; nil when unknown.
	TotalLag *int64
	// Err is the group's item error, when it could not be described.
	Err error
}

// DescribeShareGroups describes share groups and their lag (ShareGroupDescribe and
// DescribeShareGroupOffsets, KIP-932). Needs share.version >= 1: brokers answer
// UNSUPPORTED_VERSION otherwise, reported in each group's Err. With batching, concurrent
// callers share requests.
func (c *Client) DescribeShareGroups(ctx context.Context, ids ...string) (map[string]ShareGroup, error) {
	if c.batch == nil || len(ids) == 0 {
		return c.describeShareGroups(ctx, ids...)
	}
	return c.batch.shareDesc.do(ctx, ids, nil)
}

// describeShareGroups describes share groups and their lag (DescribeShareGroups and
// DescribeShareGroupOffsets, KIP-932). Needs share.version >= 1: brokers answer
// UNSUPPORTED_VERSION otherwise, reported in each group's Err.
func (c *Client) describeShareGroups(ctx context.Context, ids ...string) (out_ map[string]ShareGroup, err_ error) {
	start := time.Now()
	defer func() { c.record("ShareGroupDescribe", start, err_) }()
	out := make(map[string]ShareGroup, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	described, err := c.adm.DescribeShareGroups(ctx, ids...)
	if err != nil {
		return nil, wrap("DescribeShareGroups", "", err)
	}
	var existing []string
	for _, id := range ids {
		d, ok := described[id]
		g := ShareGroup{ID: id}
		switch {
		case !ok:
		case d.Err != nil && (IsNotFound(d.Err) || d.Err == kerr.GroupIDNotFound):
		case d.Err != nil:
			g.Err = wrap("DescribeShareGroups", "group "+id, d.Err)
		case d.GroupState == "Dead":
			g.State = d.GroupState
		default:
			g.Exists = true
			g.State = d.GroupState
			g.Members = int32(len(d.Members))
			existing = append(existing, id)
		}
		out[id] = g
	}
	if len(existing) == 0 {
		return out, nil
	}
	offs, err := c.adm.DescribeShareGroupOffsets(ctx, existing...)
	if err != nil {
		// Lag is best-effort: the group description stands without it.
		return out, nil
	}
	for _, id := range existing {
		o, ok := offs[id]
		if !ok || o.Err != nil {
			continue
		}
		var total int64
		known := false
		for _, ps := range o.Offsets {
			for _, p := range ps {
				if p.Err == nil && p.Lag >= 0 {
					total += p.Lag
					known = true
				}
			}
		}
		if known {
			g := out[id]
			g.TotalLag = &total
			out[id] = g
		}
	}
	return out, nil
}

// DeleteShareGroups deletes share groups (DeleteGroups). A group that does not exist is not
// an error; NON_EMPTY_GROUP is, while consumers are connected.
func (c *Client) DeleteShareGroups(ctx context.Context, ids ...string) (out_ map[string]error, err_ error) {
	start := time.Now()
	defer func() {
		e := err_
		if e == nil {
			e = firstItemErr(out_)
		}
		c.record("DeleteGroups", start, e)
	}()
	out := make(map[string]error, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	res, err := c.adm.DeleteGroups(ctx, ids...)
	if err != nil {
		return nil, wrap("DeleteGroups", "", err)
	}
	for _, id := range ids {
		r, ok := res[id]
		if !ok || r.Err == nil || IsNotFound(r.Err) {
			out[id] = nil
			continue
		}
		out[id] = wrap("DeleteGroups", "group "+id, r.Err)
	}
	return out, nil
}
