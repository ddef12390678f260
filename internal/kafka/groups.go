package kafka

import (
	"context"
	"errors"
	"fmt"
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
	// Err is the group's item error, when it could not be described.
	Err error
}

// DescribeShareGroups describes share groups: state and members (ShareGroupDescribe,
// KIP-932; their depth is Depth's). Needs share.version >= 1: brokers answer
// UNSUPPORTED_VERSION otherwise, reported in each group's Err. With batching, concurrent
// callers share requests.
func (c *Client) DescribeShareGroups(ctx context.Context, ids ...string) (map[string]ShareGroup, error) {
	if c.batch == nil || len(ids) == 0 {
		return c.describeShareGroups(ctx, ids...)
	}
	return c.batch.shareDesc.do(ctx, ids, nil)
}

// describeShareGroups describes share groups (ShareGroupDescribe, KIP-932). Needs share.version >= 1: brokers answer
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
		}
		out[id] = g
	}
	return out, nil
}

// DeleteShareGroups deletes share groups (DeleteGroups). A group that does not exist is not
// an error; NON_EMPTY_GROUP is, while consumers are connected. DeleteGroups deletes a group of
// any type, so the ids are first checked with OtherGroupTypes: one naming a classic, consumer
// or streams group is not deleted and its item error is ErrNotShareGroup (IsNotShareGroup).
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
	others, err := c.otherGroupTypes(ctx, ids...)
	if err != nil {
		return nil, err
	}
	var shares []string
	for _, id := range ids {
		if t := others[id]; t != "" {
			out[id] = &Error{Op: "DeleteGroups", Resource: "group " + id, Err: ErrNotShareGroup, Message: NotShareGroupMessage(id, t)}
		} else {
			shares = append(shares, id)
		}
	}
	if len(shares) == 0 {
		return out, nil
	}
	res, err := c.adm.DeleteGroups(ctx, shares...)
	if err != nil {
		return nil, wrap("DeleteGroups", "", err)
	}
	for _, id := range shares {
		r, ok := res[id]
		if !ok || r.Err == nil || IsNotFound(r.Err) {
			out[id] = nil
			continue
		}
		out[id] = wrap("DeleteGroups", "group "+id, r.Err)
	}
	return out, nil
}

// Group types as ListGroups (v5+, KIP-848) reports them. A group id names at most one group
// on a cluster, of one type: a share group's id cannot be used by a group of another type
// and the other way round.
const (
	GroupTypeClassic  = "classic"
	GroupTypeConsumer = "consumer"
	GroupTypeShare    = "share"
	GroupTypeStreams  = "streams"
)

// otherGroupTypes are the group types ListGroups is asked for by OtherGroupTypes: every type
// but share, so the answer lists only groups a share group id could collide with.
var otherGroupTypes = []string{GroupTypeClassic, GroupTypeConsumer, GroupTypeStreams}

// OtherGroupTypes reports which of ids name an existing group that is not a share group —
// a classic, consumer (KIP-848) or streams (KIP-1071) group — and its type (GroupType*
// constants). An id absent from the result names no such group: a share group or nothing.
// Kafka keeps one group per id, so writing share configs (IncrementalAlterConfigs on the
// GROUP resource) or deleting (DeleteGroups) by such an id would act on the other group.
//
// It is one ListGroups request (v5+, Kafka 3.8+) to every broker, filtered to those types;
// the brokers list only groups the principal may DESCRIBE (or all with DESCRIBE on the
// cluster). A broker that does not answer is an error unless every id was found anyway.
// A broker too old for the types filter reports no type; such a group is reported as
// classic. With batching, concurrent callers share requests.
func (c *Client) OtherGroupTypes(ctx context.Context, ids ...string) (map[string]string, error) {
	var found map[string]string
	var err error
	if c.batch == nil || len(ids) == 0 {
		found, err = c.otherGroupTypes(ctx, ids...)
	} else {
		found, err = c.batch.groupTypes.do(ctx, ids, nil)
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(found))
	for id, t := range found {
		if t != "" {
			out[id] = t
		}
	}
	return out, nil
}

// otherGroupTypes answers every id: its type, or "" when no group of another type holds it.
func (c *Client) otherGroupTypes(ctx context.Context, ids ...string) (out_ map[string]string, err_ error) {
	start := time.Now()
	defer func() { c.record("ListGroups", start, err_) }()
	out := make(map[string]string, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	listed, err := c.adm.ListGroupsByType(ctx, otherGroupTypes)
	missing := false
	for _, id := range ids {
		g, ok := listed[id]
		switch {
		case !ok:
			missing = true
			out[id] = ""
		case g.GroupType == GroupTypeShare:
			out[id] = "" // not asked for; a broker ignoring the filter may list it
		case g.GroupType == "":
			out[id] = GroupTypeClassic
		default:
			out[id] = g.GroupType
		}
	}
	if err != nil && missing {
		return nil, wrap("ListGroups", "", err)
	}
	return out, nil
}

// ErrNotShareGroup is the item error of a share-group operation refused by the operator
// because the group id names a group of another type (classic, consumer, streams).
var ErrNotShareGroup = errors.New("the group id names a group that is not a share group")

// IsNotShareGroup reports ErrNotShareGroup.
func IsNotShareGroup(err error) bool { return errors.Is(err, ErrNotShareGroup) }

// NotShareGroupMessage says that group id is a group of type typ, not a share group.
func NotShareGroupMessage(id, typ string) string {
	return fmt.Sprintf("group %s is a %s group, not a share group", id, typ)
}
