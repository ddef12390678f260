package kafka

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Broker is one live broker from the metadata.
type Broker struct {
	ID   int32
	Host string
	Port int32
	Rack string
}

// FeatureRange is a supported level range.
type FeatureRange struct{ Min, Max int16 }

// ClusterInfo is what DescribeCluster returns.
type ClusterInfo struct {
	// ClusterID is the Kafka cluster id.
	ClusterID string
	// ControllerID is the controller node id the brokers report, -1 when unknown (KRaft
	// brokers report a random broker here for older request versions).
	ControllerID int32
	// Brokers are the live brokers sorted by id.
	Brokers []Broker
	// Finalized maps each finalized feature (ApiVersions v3+ FinalizedFeatures) to its max
	// level. A feature missing from the map is not finalized (level 0).
	Finalized map[string]int16
	// Supported maps each feature to the level range every broker supports (the intersection
	// of the brokers' SupportedFeatures).
	Supported map[string]FeatureRange
}

// FeatureLevel returns the finalized level of name, 0 when it is not finalized.
func (ci ClusterInfo) FeatureLevel(name string) int16 { return ci.Finalized[name] }

// DescribeCluster reads the cluster id, brokers and controller (Metadata) and the finalized
// and supported features (ApiVersions to every broker). Features are read from what brokers
// report, never inferred from API keys: a 4.1 broker advertises share APIs with
// share.version 0.
func (c *Client) DescribeCluster(ctx context.Context) (out_ ClusterInfo, err_ error) {
	start := time.Now()
	defer func() { c.record("ApiVersions+Metadata", start, err_) }()
	// A direct request, not franz-go's metadata cache: brokers joining or leaving must show.
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	m, err := req.RequestWith(ctx, c.cl)
	if err != nil {
		return ClusterInfo{}, wrap("Metadata", "", err)
	}
	if len(m.Brokers) == 0 {
		return ClusterInfo{}, wrap("Metadata", "", errNoBrokers)
	}
	ci := ClusterInfo{ControllerID: m.ControllerID, Finalized: map[string]int16{}, Supported: map[string]FeatureRange{}}
	if m.ClusterID != nil {
		ci.ClusterID = *m.ClusterID
	}
	for _, b := range m.Brokers {
		br := Broker{ID: b.NodeID, Host: b.Host, Port: b.Port}
		if b.Rack != nil {
			br.Rack = *b.Rack
		}
		ci.Brokers = append(ci.Brokers, br)
	}
	sort.Slice(ci.Brokers, func(i, j int) bool { return ci.Brokers[i].ID < ci.Brokers[j].ID })

	vs, err := c.adm.ApiVersions(ctx)
	if err != nil {
		return ClusterInfo{}, wrap("ApiVersions", "", err)
	}
	var newestEpoch int64 = -2
	first := true
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return ClusterInfo{}, wrap("ApiVersions", "broker "+strconv.Itoa(int(v.NodeID)), v.Err)
		}
		raw := v.Raw()
		// Brokers may briefly disagree while a feature update propagates; the newest
		// finalized epoch wins.
		if raw.FinalizedFeaturesEpoch > newestEpoch {
			newestEpoch = raw.FinalizedFeaturesEpoch
			ci.Finalized = map[string]int16{}
			for _, f := range raw.FinalizedFeatures {
				if f.MaxVersionLevel > 0 {
					ci.Finalized[f.Name] = f.MaxVersionLevel
				}
			}
		}
		seen := map[string]bool{}
		for _, f := range raw.SupportedFeatures {
			seen[f.Name] = true
			r, ok := ci.Supported[f.Name]
			switch {
			case first:
				ci.Supported[f.Name] = FeatureRange{Min: f.MinVersion, Max: f.MaxVersion}
			case ok:
				r.Min = max(r.Min, f.MinVersion)
				r.Max = min(r.Max, f.MaxVersion)
				ci.Supported[f.Name] = r
			}
		}
		if !first {
			for name := range ci.Supported {
				if !seen[name] { // a broker that does not know a feature supports none of it
					delete(ci.Supported, name)
				}
			}
		}
		first = false
	}
	return ci, nil
}

// UpdateFeature raises (upgradeType 1) a finalized feature to level with UpdateFeatures. It
// never requests a downgrade. Errors: the request's, or the feature's item error (for
// example INVALID_UPDATE_VERSION when a broker does not support the level).
func (c *Client) UpdateFeature(ctx context.Context, name string, level int16) (err_ error) {
	start := time.Now()
	defer func() { c.record("UpdateFeatures", start, err_) }()
	res, err := c.adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: name, MaxVersionLevel: level, UpgradeType: 1})
	if err != nil {
		return wrap("UpdateFeatures", name, err)
	}
	if r, ok := res[name]; ok && r.Err != nil {
		return wrap("UpdateFeatures", name, r.Err)
	}
	return nil
}

// BrokerConfigs are a broker's configs by name; a config the broker does not report is
// absent (older brokers lack the KIP-1240 bounds).
type BrokerConfigs map[string]string

// Int returns the named config as an int64 and whether the broker reported a parseable value.
func (bc BrokerConfigs) Int(name string) (int64, bool) {
	s, ok := bc[name]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// DescribeBrokerConfigs reads every config of one broker (DescribeConfigs on a BROKER
// resource). Sensitive values are omitted.
func (c *Client) DescribeBrokerConfigs(ctx context.Context, brokerID int32) (out_ BrokerConfigs, err_ error) {
	start := time.Now()
	defer func() { c.record("DescribeConfigs", start, err_) }()
	rcs, err := c.adm.DescribeBrokerConfigs(ctx, brokerID)
	if err != nil {
		return nil, wrap("DescribeConfigs", "broker "+strconv.Itoa(int(brokerID)), err)
	}
	out := BrokerConfigs{}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, &Error{Op: "DescribeConfigs", Resource: "broker " + rc.Name, Err: rc.Err, Message: rc.ErrMessage}
		}
		for _, cfg := range rc.Configs {
			if cfg.Sensitive || cfg.Value == nil {
				continue
			}
			out[cfg.Key] = *cfg.Value
		}
	}
	return out, nil
}
