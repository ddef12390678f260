package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ResourceType is a DescribeConfigs/IncrementalAlterConfigs resource type; its values are
// Kafka's wire codes.
type ResourceType int8

// String is the type's Kafka name (TOPIC, GROUP_CONFIG, ...).
func (t ResourceType) String() string { return kmsg.ConfigResourceType(t).String() }

// Resource types the operator configures.
const (
	// TopicResource is resource type TOPIC (2).
	TopicResource ResourceType = ResourceType(kmsg.ConfigResourceTypeTopic)
	// GroupResource is resource type GROUP (32, KIP-848/KIP-932 group configs).
	GroupResource ResourceType = ResourceType(kmsg.ConfigResourceTypeGroupConfig)
)

// ResourceKey names one config resource.
type ResourceKey struct {
	Type ResourceType
	Name string
}

func (k ResourceKey) String() string {
	if k.Type == GroupResource {
		return "group " + k.Name
	}
	return "topic " + k.Name
}

// ConfigSource is where a config's value comes from, as DescribeConfigs reports it (Kafka's
// wire codes, KIP-226 and KIP-848).
type ConfigSource int8

// String is the source's Kafka name (e.g. DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG).
func (c ConfigSource) String() string { return kmsg.ConfigSource(c).String() }

// Config sources.
const (
	ConfigSourceUnknown              = ConfigSource(kmsg.ConfigSourceUnknown)                    // 0
	ConfigSourceDynamicTopic         = ConfigSource(kmsg.ConfigSourceDynamicTopicConfig)         // 1: a topic override
	ConfigSourceDynamicBroker        = ConfigSource(kmsg.ConfigSourceDynamicBrokerConfig)        // 2
	ConfigSourceDynamicDefaultBroker = ConfigSource(kmsg.ConfigSourceDynamicDefaultBrokerConfig) // 3
	ConfigSourceStaticBroker         = ConfigSource(kmsg.ConfigSourceStaticBrokerConfig)         // 4: server.properties
	ConfigSourceDefault              = ConfigSource(kmsg.ConfigSourceDefaultConfig)              // 5: Kafka's built-in default
	ConfigSourceDynamicBrokerLogger  = ConfigSource(kmsg.ConfigSourceDynamicBrokerLoggerConfig)  // 6
	ConfigSourceClientMetrics        = ConfigSource(kmsg.ConfigSourceClientMetricsConfig)        // 7
	ConfigSourceGroup                = ConfigSource(kmsg.ConfigSourceGroupConfig)                // 8: a group override
)

// ConfigEntry is one config of a resource as the broker reports it.
type ConfigEntry struct {
	// Value is the config's value ("" for a null value).
	Value string
	// Source is where the value comes from.
	Source ConfigSource
}

// configEntry is a config of a DescribeConfigs or CreateTopics answer (a null value is "").
func configEntry(value *string, source kmsg.ConfigSource) ConfigEntry {
	e := ConfigEntry{Source: ConfigSource(source)}
	if value != nil {
		e.Value = *value
	}
	return e
}

// IsOverride is true when the value was set on the resource itself (topic or group config),
// not inherited from a broker or the built-in default.
func (e ConfigEntry) IsOverride() bool {
	return e.Source == ConfigSourceDynamicTopic || e.Source == ConfigSourceGroup
}

// ResourceConfigs are the configs of one resource, or the item error that kept them from
// being read.
type ResourceConfigs struct {
	Configs map[string]ConfigEntry
	Err     error
}

// DescribeConfigs reads the configs of topics and groups (DescribeConfigs with synonyms off).
// Per-resource failures are in ResourceConfigs.Err; a GROUP resource on a cluster without
// group configs answers INVALID_REQUEST or UNSUPPORTED_VERSION (IsUnsupported). With
// batching, concurrent callers share requests.
func (c *Client) DescribeConfigs(ctx context.Context, keys []ResourceKey) (map[ResourceKey]ResourceConfigs, error) {
	if c.batch == nil || len(keys) == 0 {
		return c.describeConfigs(ctx, keys)
	}
	return c.batch.configs.do(ctx, keys, nil)
}

// describeConfigs reads the configs of many topics and groups in as few requests as the
// client's sharding allows (topic and group resources go to any broker). Per-resource
// failures (unknown topic, group configs unsupported) are in the result's Err.
func (c *Client) describeConfigs(ctx context.Context, keys []ResourceKey) (out_ map[ResourceKey]ResourceConfigs, err_ error) {
	start := time.Now()
	defer func() { c.record("DescribeConfigs", start, err_) }()
	out := make(map[ResourceKey]ResourceConfigs, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, k := range keys {
		r := kmsg.NewDescribeConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceType(k.Type)
		r.ResourceName = k.Name
		req.Resources = append(req.Resources, r)
	}
	for _, shard := range c.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, wrap("DescribeConfigs", "", shard.Err)
		}
		resp := shard.Resp.(*kmsg.DescribeConfigsResponse)
		for _, r := range resp.Resources {
			key := ResourceKey{Type: ResourceType(r.ResourceType), Name: r.ResourceName}
			rc := ResourceConfigs{Err: itemErr("DescribeConfigs", key.String(), r.ErrorCode, r.ErrorMessage)}
			if rc.Err == nil {
				rc.Configs = make(map[string]ConfigEntry, len(r.Configs))
				for _, cfg := range r.Configs {
					rc.Configs[cfg.Name] = configEntry(cfg.Value, cfg.Source)
				}
			}
			out[key] = rc
		}
	}
	for _, k := range keys {
		if _, ok := out[k]; !ok {
			out[k] = ResourceConfigs{Err: &Error{Op: "DescribeConfigs", Resource: k.String(), Err: kerr.UnknownServerError, Message: "no result for resource"}}
		}
	}
	return out, nil
}

// ConfigOp is an incremental alter operation (Kafka's wire codes, KIP-339).
type ConfigOp int8

// String is the operation's Kafka name (SET, DELETE, APPEND, SUBTRACT).
func (o ConfigOp) String() string { return kmsg.IncrementalAlterConfigOp(o).String() }

// Incremental alter operations.
const (
	OpSet    = ConfigOp(kmsg.IncrementalAlterConfigOpSet)
	OpDelete = ConfigOp(kmsg.IncrementalAlterConfigOpDelete)
)

// AlterConfig is one config change.
type AlterConfig struct {
	Name  string
	Op    ConfigOp
	Value string // ignored for OpDelete
}

// Alteration is the changes to one resource.
type Alteration struct {
	Resource ResourceKey
	Configs  []AlterConfig
}

// IncrementalAlterConfigs applies each resource's config changes (IncrementalAlterConfigs).
// The map holds each resource's item error (nil on success); INVALID_CONFIG carries the
// broker's message, which names the bound for KIP-1240 rejections. Altering a GROUP needs
// ALTER_CONFIGS on the group. With batching, concurrent callers share requests; a resource
// appears at most once per request.
func (c *Client) IncrementalAlterConfigs(ctx context.Context, alts []Alteration) (map[ResourceKey]error, error) {
	if c.batch == nil || len(alts) == 0 {
		return c.incrementalAlterConfigs(ctx, alts, false)
	}
	keys := make([]ResourceKey, len(alts))
	payloads := make([][]AlterConfig, len(alts))
	for i, a := range alts {
		keys[i], payloads[i] = a.Resource, a.Configs
	}
	return c.batch.alter.do(ctx, keys, payloads)
}

// ValidateIncrementalAlterConfigs asks the brokers whether IncrementalAlterConfigs would
// succeed (ValidateOnly): each value is checked as for a real change (INVALID_CONFIG with the
// broker's message, UNKNOWN_TOPIC_OR_PARTITION, ...) and nothing changes. The map holds each
// resource's item error. Never batched.
func (c *Client) ValidateIncrementalAlterConfigs(ctx context.Context, alts []Alteration) (map[ResourceKey]error, error) {
	return c.incrementalAlterConfigs(ctx, alts, true)
}

// incrementalAlterConfigs applies many resources' changes in as few requests as possible
// (validateOnly: only checks them). The map holds each resource's item error (nil on
// success); INVALID_CONFIG carries the broker's message, which names the bound for KIP-1240
// rejections. Altering a GROUP needs ALTER_CONFIGS on the group.
func (c *Client) incrementalAlterConfigs(ctx context.Context, alts []Alteration, validateOnly bool) (out_ map[ResourceKey]error, err_ error) {
	start := time.Now()
	defer func() {
		e := err_
		if e == nil {
			e = firstItemErr(out_)
		}
		c.record("IncrementalAlterConfigs", start, e)
	}()
	out := make(map[ResourceKey]error, len(alts))
	if len(alts) == 0 {
		return out, nil
	}
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	for _, a := range alts {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceType(a.Resource.Type)
		r.ResourceName = a.Resource.Name
		for _, cfg := range a.Configs {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name = cfg.Name
			rc.Op = kmsg.IncrementalAlterConfigOp(cfg.Op)
			if cfg.Op == OpSet {
				v := cfg.Value
				rc.Value = &v
			}
			r.Configs = append(r.Configs, rc)
		}
		req.Resources = append(req.Resources, r)
	}
	for _, shard := range c.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, wrap("IncrementalAlterConfigs", "", shard.Err)
		}
		resp := shard.Resp.(*kmsg.IncrementalAlterConfigsResponse)
		for _, r := range resp.Resources {
			key := ResourceKey{Type: ResourceType(r.ResourceType), Name: r.ResourceName}
			out[key] = itemErr("IncrementalAlterConfigs", key.String(), r.ErrorCode, r.ErrorMessage)
		}
	}
	for _, a := range alts {
		if _, ok := out[a.Resource]; !ok {
			out[a.Resource] = &Error{Op: "IncrementalAlterConfigs", Resource: a.Resource.String(), Err: kerr.UnknownServerError, Message: "no result for resource"}
		}
	}
	return out, nil
}
