package kafka

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Topic is one topic as the metadata describes it.
type Topic struct {
	Name string
	// ID is the topic id as Kafka's tools print it; empty when the broker has none.
	ID string
	// Partitions is the partition count.
	Partitions int32
	// ReplicationFactor is the smallest replica count over the partitions.
	ReplicationFactor int32
	// Replicas maps each partition to its replica broker ids.
	Replicas map[int32][]int32
	// ISR maps each partition to its in-sync replicas.
	ISR map[int32][]int32
	// Internal is true for internal topics such as __share_group_state.
	Internal bool
	// LiveBrokers is the number of brokers listed in the same Metadata response (the brokers
	// the cluster considers alive, KRaft leaving fenced ones out), so a replication claim and
	// the broker count it is measured against come from one moment; 0 when unknown.
	LiveBrokers int32
	// Err is the topic's item error; IsNotFound(Err) when the topic does not exist.
	Err error
}

// UnderReplicated counts partitions whose ISR is smaller than their replica set.
func (t Topic) UnderReplicated() int32 {
	var n int32
	for p, rs := range t.Replicas {
		if len(t.ISR[p]) < len(rs) {
			n++
		}
	}
	return n
}

// DescribeTopics reads the metadata of the named topics with a Metadata request sent to a
// broker (never franz-go's metadata cache, which may be seconds old; auto creation off).
// Missing topics have Err with IsNotFound. With batching, concurrent callers share requests.
func (c *Client) DescribeTopics(ctx context.Context, names ...string) (map[string]Topic, error) {
	if c.batch == nil || len(names) == 0 {
		return c.describeTopics(ctx, names...)
	}
	return c.batch.topics.do(ctx, names, nil)
}

// metadata sends one Metadata request for the named topics to a broker (auto creation off).
func (c *Client) metadata(ctx context.Context, names []string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false
	for _, name := range names {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, wrap("Metadata", "", err)
	}
	return resp, nil
}

// describeTopics reads the metadata of the named topics in one Metadata request sent to a
// broker (never franz-go's metadata cache, which may be seconds old; auto creation off).
// Missing topics have Err with IsNotFound.
func (c *Client) describeTopics(ctx context.Context, names ...string) (out_ map[string]Topic, err_ error) {
	start := time.Now()
	defer func() { c.record("Metadata", start, err_) }()
	out := make(map[string]Topic, len(names))
	if len(names) == 0 {
		return out, nil
	}
	resp, err := c.metadata(ctx, names)
	if err != nil {
		return nil, err
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil {
			continue
		}
		name := *rt.Topic
		if err := itemErr("Metadata", "topic "+name, rt.ErrorCode, nil); err != nil {
			out[name] = Topic{Name: name, Err: err}
			continue
		}
		t := Topic{Name: name, Internal: rt.IsInternal, Partitions: int32(len(rt.Partitions)), Replicas: map[int32][]int32{}, ISR: map[int32][]int32{}, LiveBrokers: int32(len(resp.Brokers))}
		if rt.TopicID != ([16]byte{}) {
			t.ID = topicID(rt.TopicID)
		}
		for i, p := range rt.Partitions {
			t.Replicas[p.Partition] = p.Replicas
			t.ISR[p.Partition] = p.ISR
			if i == 0 || int32(len(p.Replicas)) < t.ReplicationFactor {
				t.ReplicationFactor = int32(len(p.Replicas))
			}
		}
		out[name] = t
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			out[name] = Topic{Name: name, Err: &Error{Op: "Metadata", Resource: "topic " + name, Err: kerr.UnknownTopicOrPartition}}
		}
	}
	return out, nil
}

// NewTopic is a topic to create.
type NewTopic struct {
	Name       string
	Partitions int32
	// ReplicationFactor is the replica count; -1 uses the brokers' default.replication.factor.
	ReplicationFactor int16
	Configs           map[string]string
}

// CreatedTopic is one CreateTopics result.
type CreatedTopic struct {
	Name string
	ID   string
	// Partitions and ReplicationFactor are what the controller created (brokers' defaults
	// resolved), when the broker reports them.
	Partitions        int32
	ReplicationFactor int32
	// Configs are the created topic's configs, defaults resolved, when the broker reports
	// them (CreateTopics v5+).
	Configs map[string]ConfigEntry
	// Err is the item error: TOPIC_ALREADY_EXISTS (IsAlreadyExists), INVALID_CONFIG,
	// INVALID_REPLICATION_FACTOR, POLICY_VIOLATION, ...
	Err error
}

// CreateTopics creates topics, each with its own partitions, replication factor and configs
// (CreateTopics to the controller). Per-topic failures are in CreatedTopic.Err. With
// batching, concurrent callers' topics are created by shared requests of at most
// Batching.MaxItems topics and about 5000 KRaft records.
func (c *Client) CreateTopics(ctx context.Context, topics []NewTopic) (map[string]CreatedTopic, error) {
	if c.batch == nil || len(topics) == 0 {
		return c.createTopics(ctx, topics, false)
	}
	keys := make([]string, len(topics))
	payloads := make([]NewTopic, len(topics))
	for i, t := range topics {
		keys[i], payloads[i] = t.Name, t
	}
	return c.batch.create.do(ctx, keys, payloads)
}

// ValidateCreateTopics asks the controller whether CreateTopics would succeed for these
// topics (CreateTopics with ValidateOnly): the brokers check names, partitions, replication
// factor and every config value as for a real creation, and create nothing. Per-topic
// refusals (INVALID_CONFIG with the broker's message, TOPIC_ALREADY_EXISTS, ...) are in
// CreatedTopic.Err; a topic that would be created has Err nil and no ID. Validate-only calls
// are never batched, so no request mixes them with real ones.
func (c *Client) ValidateCreateTopics(ctx context.Context, topics []NewTopic) (map[string]CreatedTopic, error) {
	return c.createTopics(ctx, topics, true)
}

// TopicCollisionName is Kafka's collision name of a topic: its name with '.' replaced by
// '_' (Kafka's Topic.unifyCollisionChars). Kafka's metric names make that replacement, so
// it refuses a topic whose collision name is an existing topic's ("collides with existing
// topic"). Ok is false for a name without '.' or '_', which collides with no other name.
func TopicCollisionName(topic string) (name string, ok bool) {
	if !strings.ContainsAny(topic, "._") {
		return "", false
	}
	return strings.ReplaceAll(topic, ".", "_"), true
}

// createTopics creates many topics in requests to the controller, each with its own
// partitions, replication factor and configs; validateOnly only checks them. Topics whose
// names collide (TopicCollisionName) go in separate requests, one after the other: Kafka
// checks a name against the topics that exist, not against the rest of its request, and
// created both of "a.b" and "a_b" when one request named them.
func (c *Client) createTopics(ctx context.Context, topics []NewTopic, validateOnly bool) (map[string]CreatedTopic, error) {
	var waves [][]NewTopic
	first := map[string]string{} // collision name → the first topic named with it
	wave := map[string]int{}     // collision name → the next wave it may go in
	out := make(map[string]CreatedTopic, len(topics))
	for _, t := range topics {
		i := 0
		if cn, ok := TopicCollisionName(t.Name); ok {
			i = wave[cn]
			wave[cn] = i + 1
			if i == 0 {
				first[cn] = t.Name
			} else if validateOnly {
				// Nothing is created, so a later request could not see the collision.
				msg := fmt.Sprintf("Topic '%s' collides with topic '%s' asked for before it (Kafka refuses two topic names that differ only in '.' and '_')", t.Name, first[cn])
				out[t.Name] = CreatedTopic{Name: t.Name, Err: itemErr("CreateTopics", "topic "+t.Name, kerr.InvalidTopicException.Code, &msg)}
				continue
			}
		}
		if i == len(waves) {
			waves = append(waves, nil)
		}
		waves[i] = append(waves[i], t)
	}
	for _, w := range waves {
		res, err := c.createTopicsOnce(ctx, w, validateOnly)
		if err != nil {
			return nil, err
		}
		maps.Copy(out, res)
	}
	return out, nil
}

// createTopicsOnce is one CreateTopics request.
func (c *Client) createTopicsOnce(ctx context.Context, topics []NewTopic, validateOnly bool) (out_ map[string]CreatedTopic, err_ error) {
	start := time.Now()
	defer func() {
		e := err_
		for _, ct := range out_ {
			if e == nil && ct.Err != nil {
				e = ct.Err
			}
		}
		c.record("CreateTopics", start, e)
	}()
	out := make(map[string]CreatedTopic, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(c.timeout / time.Millisecond)
	req.ValidateOnly = validateOnly
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic = t.Name
		rt.NumPartitions = t.Partitions
		rt.ReplicationFactor = t.ReplicationFactor
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			rc := kmsg.NewCreateTopicsRequestTopicConfig()
			rc.Name = k
			v := t.Configs[k]
			rc.Value = &v
			rt.Configs = append(rt.Configs, rc)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, wrap("CreateTopics", "", err)
	}
	for _, t := range resp.Topics {
		ct := CreatedTopic{Name: t.Topic, Partitions: t.NumPartitions, ReplicationFactor: int32(t.ReplicationFactor),
			Err: itemErr("CreateTopics", "topic "+t.Topic, t.ErrorCode, t.ErrorMessage)}
		if t.TopicID != ([16]byte{}) {
			ct.ID = topicID(t.TopicID)
		}
		if len(t.Configs) > 0 {
			ct.Configs = make(map[string]ConfigEntry, len(t.Configs))
			for _, cfg := range t.Configs {
				ct.Configs[cfg.Name] = configEntry(cfg.Value, kmsg.ConfigSource(cfg.Source))
			}
		}
		out[t.Topic] = ct
	}
	return out, nil
}

// GrowPartitions raises each topic's partition count to the given total (CreatePartitions).
// The map holds each topic's item error. With batching, concurrent callers share requests.
func (c *Client) GrowPartitions(ctx context.Context, totals map[string]int32) (map[string]error, error) {
	if c.batch == nil || len(totals) == 0 {
		return c.growPartitions(ctx, totals, false)
	}
	keys := make([]string, 0, len(totals))
	payloads := make([]int32, 0, len(totals))
	for k, v := range totals {
		keys, payloads = append(keys, k), append(payloads, v)
	}
	return c.batch.grow.do(ctx, keys, payloads)
}

// ValidateGrowPartitions asks the controller whether GrowPartitions would succeed
// (CreatePartitions with ValidateOnly); nothing changes. The map holds each topic's item
// error. Never batched.
func (c *Client) ValidateGrowPartitions(ctx context.Context, totals map[string]int32) (map[string]error, error) {
	return c.growPartitions(ctx, totals, true)
}

// growPartitions raises each topic's partition count to the given total (CreatePartitions);
// validateOnly only checks it. Item errors: INVALID_PARTITIONS when the total is not larger,
// UNKNOWN_TOPIC_OR_PARTITION.
func (c *Client) growPartitions(ctx context.Context, totals map[string]int32, validateOnly bool) (out_ map[string]error, err_ error) {
	start := time.Now()
	defer func() {
		e := err_
		if e == nil {
			e = firstItemErr(out_)
		}
		c.record("CreatePartitions", start, e)
	}()
	out := make(map[string]error, len(totals))
	if len(totals) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = int32(c.timeout / time.Millisecond)
	req.ValidateOnly = validateOnly
	for name, n := range totals {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = name
		rt.Count = n
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, wrap("CreatePartitions", "", err)
	}
	for _, t := range resp.Topics {
		out[t.Topic] = itemErr("CreatePartitions", "topic "+t.Topic, t.ErrorCode, t.ErrorMessage)
	}
	return out, nil
}

// DeleteTopics deletes the named topics. A topic that is already gone is not an error.
func (c *Client) DeleteTopics(ctx context.Context, names ...string) (out_ map[string]error, err_ error) {
	start := time.Now()
	defer func() {
		e := err_
		if e == nil {
			e = firstItemErr(out_)
		}
		c.record("DeleteTopics", start, e)
	}()
	out := make(map[string]error, len(names))
	if len(names) == 0 {
		return out, nil
	}
	res, err := c.adm.DeleteTopics(ctx, names...)
	if err != nil {
		return nil, wrap("DeleteTopics", "", err)
	}
	for _, name := range names {
		r, ok := res[name]
		switch {
		case !ok:
			out[name] = nil
		case r.Err != nil && !IsNotFound(r.Err):
			out[name] = &Error{Op: "DeleteTopics", Resource: "topic " + name, Err: r.Err, Message: r.ErrMessage}
		default:
			out[name] = nil
		}
	}
	return out, nil
}

// topicID renders a topic id the way Kafka's tools print it (Uuid.toString: URL-safe base64,
// no padding).
func topicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// ListTopicNames lists every topic name, internal ones included (one Metadata request).
func (c *Client) ListTopicNames(ctx context.Context) ([]string, error) {
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return nil, wrap("Metadata", "", err)
	}
	out := make([]string, 0, len(resp.Topics))
	for _, t := range resp.Topics {
		if t.Topic != nil {
			out = append(out, *t.Topic)
		}
	}
	sort.Strings(out)
	return out, nil
}
