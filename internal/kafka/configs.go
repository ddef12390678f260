package kafka

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ResourceType is a DescribeConfigs/IncrementalAlterConfigs resource type.
type ResourceType = kmsg.ConfigResourceType

// Resource types the operator configures.
const (
	// TopicResource is resource type TOPIC (2).
	TopicResource ResourceType = kmsg.ConfigResourceTypeTopic
	// GroupResource is resource type GROUP (32, KIP-848/KIP-932 group configs).
	GroupResource ResourceType = kmsg.ConfigResourceTypeGroupConfig
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

// ConfigEntry is one config of a resource as the broker reports it.
type ConfigEntry struct {
	// Value is the config's value ("" for a null value).
	Value string
	// Source is the Kafka config source (DYNAMIC_TOPIC_CONFIG=1, GROUP_CONFIG=8,
	// DEFAULT_CONFIG=5, STATIC_BROKER_CONFIG=4, ...).
	Source kmsg.ConfigSource
}

// IsOverride is true when the value was set on the resource itself (topic or group config),
// not inherited from a broker or the built-in default.
func (e ConfigEntry) IsOverride() bool {
	return e.Source == kmsg.ConfigSourceDynamicTopicConfig || e.Source == kmsg.ConfigSourceGroupConfig
}

// ResourceConfigs are the configs of one resource, or the item error that kept them from
// being read.
type ResourceConfigs struct {
	Configs map[string]ConfigEntry
	Err     error
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
		r.ResourceType = k.Type
		r.ResourceName = k.Name
		req.Resources = append(req.Resources, r)
	}
	for _, shard := range c.cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return nil, wrap("DescribeConfigs", "", shard.Err)
		}
		resp := shard.Resp.(*kmsg.DescribeConfigsResponse)
		for _, r := range resp.Resources {
			key := ResourceKey{Type: r.ResourceType, Name: r.ResourceName}
			rc := ResourceConfigs{Err: itemErr("DescribeConfigs", key.String(), r.ErrorCode, r.ErrorMessage)}
			if rc.Err == nil {
				rc.Configs = make(map[string]ConfigEntry, len(r.Configs))
				for _, cfg := range r.Configs {
					e := ConfigEntry{Source: cfg.Source}
					if cfg.Value != nil {
						e.Value = *cfg.Value
					}
					rc.Configs[cfg.Name] = e
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

// ConfigOp is an incremental alter operation.
type ConfigOp = kmsg.IncrementalAlterConfigOp

// Incremental alter operations.
const (
	OpSet    ConfigOp = kmsg.IncrementalAlterConfigOpSet
	OpDelete ConfigOp = kmsg.IncrementalAlterConfigOpDelete
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

// incrementalAlterConfigs applies many resources' changes in as few requests as possible.
// The map holds each resource's item error (nil on success); INVALID_CONFIG carries the
// broker's message, which names the bound for KIP-1240 rejections. Altering a GROUP needs
// ALTER_CONFIGS on the group.
func (c *Client) incrementalAlterConfigs(ctx context.Context, alts []Alteration) (out_ map[ResourceKey]error, err_ error) {
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
	for _, a := range alts {
		r := kmsg.NewIncrementalAlterConfigsRequestResource()
		r.ResourceType = a.Resource.Type
		r.ResourceName = a.Resource.Name
		for _, cfg := range a.Configs {
			rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			rc.Name = cfg.Name
			rc.Op = cfg.Op
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
			key := ResourceKey{Type: r.ResourceType, Name: r.ResourceName}
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
