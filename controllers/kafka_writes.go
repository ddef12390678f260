package controllers

import (
	"context"
	"sync"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

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
	var out writeOutcome
	var wg sync.WaitGroup
	if w.Create != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cl.CreateTopics(ctx, []kafka.NewTopic{*w.Create})
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
			res, err := cl.GrowPartitions(ctx, map[string]int32{w.Topic: w.GrowTo})
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
			res, err := cl.IncrementalAlterConfigs(ctx, alts)
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
