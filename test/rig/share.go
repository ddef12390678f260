package rig

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAndShareConsume produces n records to topic and consumes them with a franz-go share
// consumer in group (KIP-932), returning how many records it received before the deadline.
// The first share-group use also makes the brokers create __share_group_state.
func ProduceAndShareConsume(ctx context.Context, bootstrap []string, topic, group string, n int, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return 0, err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic))
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	// Join first so records produced next are not skipped by share.auto.offset.reset=latest.
	got := 0
	produced := false
	for got < n {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		fs := cons.PollFetches(pctx)
		pcancel()
		fs.EachRecord(func(*kgo.Record) { got++ })
		if !produced {
			for i := 0; i < n; i++ {
				if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("record-%d", i))}).FirstErr(); err != nil {
					return got, fmt.Errorf("producing: %w", err)
				}
			}
			produced = true
		}
		if ctx.Err() != nil {
			return got, nil
		}
	}
	return got, nil
}

// ProduceSpread writes n records ("r0", "r1", ...) to topic, spread over its partitions round
// robin, and returns once all are acknowledged.
func ProduceSpread(ctx context.Context, bootstrap []string, topic string, n int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		// A topic just made may be missing from a broker's metadata for a moment (the controller
		// has it first): retry until ctx ends rather than four times.
		kgo.UnknownTopicRetries(-1))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Value: []byte(fmt.Sprintf("r%d", i))}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}
