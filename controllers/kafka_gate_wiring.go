package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// gateChannels are the sources the gate wakes objects through (source.Channel, as topicGone):
// one per kind it gates and one for the KafkaCluster prober.
type gateChannels struct {
	queues, routes, clusters chan event.GenericEvent
}

// newGate builds the manager's shared gate and wires its wake-ups to channels that the
// reconcilers watch. Sends run in their own goroutine (a recovery wakes thousands of objects;
// the controllers' sources drain the channels) and stop when the manager stops.
func newGate(mgr manager.Manager, trialTimeout time.Duration) (*kafkaGate, gateChannels, error) {
	ch := gateChannels{queues: make(chan event.GenericEvent, 1024), routes: make(chan event.GenericEvent, 1024), clusters: make(chan event.GenericEvent, 16)}
	g := newKafkaGate(clock.RealClock{}, trialTimeout)
	stopping := make(chan struct{})
	send := func(c chan event.GenericEvent, ev event.GenericEvent) {
		go func() {
			select {
			case c <- ev:
			case <-stopping:
			}
		}()
	}
	g.wake = func(w gateWaiter) {
		meta := metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}
		if w.Kind == gateRoute {
			send(ch.routes, event.GenericEvent{Object: &kqv1.DeadLetterRoute{ObjectMeta: meta}})
			return
		}
		send(ch.queues, event.GenericEvent{Object: &kqv1.ShareQueue{ObjectMeta: meta}})
	}
	g.recover = func(cluster string) {
		nn := splitKey(cluster)
		send(ch.clusters, event.GenericEvent{Object: &kqv1.KafkaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name}}})
	}
	err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		close(stopping)
		return nil
	}))
	return g, ch, err
}

// splitKey is the inverse of clusterKey.
func splitKey(key string) types.NamespacedName {
	for i := range len(key) {
		if key[i] == '/' {
			return types.NamespacedName{Namespace: key[:i], Name: key[i+1:]}
		}
	}
	return types.NamespacedName{Name: key}
}

// gateCheck is the gate in a queue's or route's reconcile, before its first Kafka call: nil
// when it may go on; else the wait (Ready=False, KafkaUnavailable, naming the next attempt
// and the last error; no Kafka call made) — the gate wakes the object when the cluster is
// back, and after (the resync interval, jittered) it looks again anyway.
func gateCheck(g *kafkaGate, kc *kqv1.KafkaCluster, w gateWaiter, after time.Duration) error {
	if g == nil {
		return nil
	}
	v := g.admit(clusterKey(kc), w)
	if v.OK {
		return nil
	}
	kafkaGatedReconciles.WithLabelValues(w.Kind).Inc()
	return &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: v.message(kc.Name), After: gateJitterFor(after)}
}

// gateDown is the gate for an object whose KafkaCluster reports Connected=False because its
// prober could not reach the brokers (ConnectionFailed): the same outage. The object waits
// (ClusterNotReady, as before) unless it is the cluster's trial; then it goes on to Kafka and
// its success ends the backoff for all. Other reasons (no client, Secret missing, never
// probed) wait for the KafkaCluster watch as before.
func gateDown(g *kafkaGate, kc *kqv1.KafkaCluster, w gateWaiter, c *metav1.Condition, msg string, after time.Duration) (trial bool, err error) {
	if g == nil || c == nil || c.Reason != kqv1.ReasonConnectionFailed {
		return false, waiting(kqv1.ReasonClusterNotReady, msg)
	}
	key := clusterKey(kc)
	g.down(key, c.Message)
	v := g.admit(key, w)
	if v.OK {
		return true, nil
	}
	kafkaGatedReconciles.WithLabelValues(w.Kind).Inc()
	return false, &waitError{Reason: kqv1.ReasonClusterNotReady, Message: msg + "; " + v.message(kc.Name), After: gateJitterFor(after)}
}

// gateOutcome hands a request-level Kafka failure (a waiting outcome whose Cause
// kafka.IsUnreachable) to the cluster's gate instead of the object's own per-item backoff:
// the object waits for the gate's wake-up (or after, jittered), and the message adds the next
// attempt. reason, when set, replaces the wait's reason (a trial of a disconnected cluster
// stays ClusterNotReady). Any other outcome is returned as it is.
func gateOutcome(g *kafkaGate, kc *kqv1.KafkaCluster, w gateWaiter, err error, after time.Duration, reason string) error {
	var we *waitError
	if g == nil || kc.Name == "" || !errors.As(err, &we) || we.Cause == nil || !kafka.IsUnreachable(we.Cause) {
		return err
	}
	v := g.failure(clusterKey(kc), w, we.Cause)
	we.Cause, we.After = nil, gateJitterFor(after)
	we.Message = fmt.Sprintf("%s; %s", we.Message, v.message(kc.Name))
	if reason != "" {
		we.Reason = reason
	}
	return err
}
