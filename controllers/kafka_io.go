package controllers

import (
	"context"
	"sync"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// liveTopicAndGroup is what readTopicAndGroup found: the topic (Err IsNotFound when missing),
// its configs when it exists, and the group's configs (nil when the cluster has no group
// configs).
type liveTopicAndGroup struct {
	Topic        kafka.Topic
	TopicConfigs map[string]kafka.ConfigEntry
	GroupConfigs map[string]kafka.ConfigEntry
}

// readTopicAndGroup reads a topic's metadata and the configs of the topic and a group, the two
// requests concurrently (with batching on, each joins other reconciles' requests). A topic
// created between the two reads is an error: look again rather than plan from half a picture.
func readTopicAndGroup(ctx context.Context, cl *kafka.Client, topicName, groupID string) (liveTopicAndGroup, error) {
	var live liveTopicAndGroup
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: groupID}
	topicKey := kafka.ResourceKey{Type: kafka.TopicResource, Name: topicName}
	var (
		wg               sync.WaitGroup
		topics           map[string]kafka.Topic
		cfgs             map[kafka.ResourceKey]kafka.ResourceConfigs
		topicErr, cfgErr error
	)
	wg.Add(2)
	go func() { defer wg.Done(); topics, topicErr = cl.DescribeTopics(ctx, topicName) }()
	go func() {
		defer wg.Done()
		cfgs, cfgErr = cl.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey, topicKey})
	}()
	wg.Wait()
	if topicErr != nil {
		return live, topicErr
	}
	live.Topic = topics[topicName]
	if live.Topic.Err != nil && !kafka.IsNotFound(live.Topic.Err) {
		return live, live.Topic.Err
	}
	if cfgErr != nil {
		return live, cfgErr
	}
	if rc := cfgs[groupKey]; rc.Err == nil {
		live.GroupConfigs = rc.Configs
	} else if !kafka.IsUnsupported(rc.Err) {
		return live, rc.Err
	}
	if live.Topic.Err == nil {
		rc := cfgs[topicKey]
		if rc.Err != nil {
			return live, rc.Err
		}
		live.TopicConfigs = rc.Configs
	}
	return live, nil
}

// topicWrites are one resource's Kafka writes: create or grow its topic, alter the topic's and
// the group's configs. None depends on another's result.
type topicWrites struct {
	Topic        string
	Create       *kafka.NewTopic
	GrowTo       int32
	TopicConfigs []kafka.AlterConfig
	Group        string
	GroupConfigs []kafka.AlterConfig
}

// writeOutcome is each write's error: the request's, else the item's; nil when it succeeded
// or was not asked for.
type writeOutcome struct {
	Created                                            kafka.CreatedTopic
	CreateErr, GrowErr, TopicConfigErr, GroupConfigErr error
}

// sendWrites sends the writes concurrently (with batching on, each joins other reconciles'
// requests): at most one CreateTopics, one CreatePartitions and one IncrementalAlterConfigs
// carrying topic and group together.
func sendWrites(ctx context.Context, cl *kafka.Client, w topicWrites) writeOutcome {
	return sendTopicWrites(ctx, cl, w, false)
}

// validateWrites asks the brokers whether the writes would succeed (each request with
// ValidateOnly, never batched with real writes): the outcome holds the brokers' refusals, and
// nothing is written.
func validateWrites(ctx context.Context, cl *kafka.Client, w topicWrites) writeOutcome {
	return sendTopicWrites(ctx, cl, w, true)
}

func sendTopicWrites(ctx context.Context, cl *kafka.Client, w topicWrites, validateOnly bool) writeOutcome {
	create, grow, alter := cl.CreateTopics, cl.GrowPartitions, cl.IncrementalAlterConfigs
	if validateOnly {
		create, grow, alter = cl.ValidateCreateTopics, cl.ValidateGrowPartitions, cl.ValidateIncrementalAlterConfigs
	}
	var out writeOutcome
	var wg sync.WaitGroup
	if w.Create != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := create(ctx, []kafka.NewTopic{*w.Create})
			if err == nil {
				out.Created = res[w.Create.Name]
				err = out.Created.Err
			}
			out.CreateErr = err
		}()
	}
	if w.GrowTo > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := grow(ctx, map[string]int32{w.Topic: w.GrowTo})
			if err == nil {
				err = res[w.Topic]
			}
			out.GrowErr = err
		}()
	}
	topicKey := kafka.ResourceKey{Type: kafka.TopicResource, Name: w.Topic}
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: w.Group}
	var alts []kafka.Alteration
	if len(w.TopicConfigs) > 0 {
		alts = append(alts, kafka.Alteration{Resource: topicKey, Configs: w.TopicConfigs})
	}
	if len(w.GroupConfigs) > 0 {
		alts = append(alts, kafka.Alteration{Resource: groupKey, Configs: w.GroupConfigs})
	}
	if len(alts) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := alter(ctx, alts)
			if len(w.TopicConfigs) > 0 {
				out.TopicConfigErr = err
				if err == nil {
					out.TopicConfigErr = res[topicKey]
				}
			}
			if len(w.GroupConfigs) > 0 {
				out.GroupConfigErr = err
				if err == nil {
					out.GroupConfigErr = res[groupKey]
				}
			}
		}()
	}
	wg.Wait()
	return out
}
