package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// finalize removes the broker-native dead-letter configs this route set on the group (so the
// brokers stop writing to a topic nobody declares), keeps the topic, and releases the
// finalizer. An unreachable cluster is waited for up to FinalizerTimeout.
func (d *routeScope) finalize(ctx context.Context) error {
	dlr, r := d.dlr, d.r
	if dlr.DeletionTimestamp.IsZero() {
		return nil
	}
	if !controllerutil.ContainsFinalizer(dlr, RouteFinalizer) {
		return errDone
	}
	release := func() error { return r.releaseFinalizer(ctx, dlr) }
	if dlr.Status.EffectiveMode != kqv1.DeadLetterModeBrokerNative {
		return release()
	}
	if next, err := r.firstRouteOf(ctx, dlr.Namespace, dlr.Spec.QueueRef.Name); err != nil {
		return err
	} else if next != nil {
		// Another route of the queue takes over and sets its own configs: removing these
		// would leave the group without a dead-letter topic in between.
		return release()
	}
	giveUp := func(why string) error {
		if d.waitBeforeAbandoning(r.FinalizerTimeout) {
			return errDone
		}
		r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("%s; released the finalizer after %s, leaving the %s configs on the group", why, r.FinalizerTimeout, dlqTopicNameConfig))
		return release()
	}
	// The group and cluster as last resolved: the ShareQueue may already be gone (with
	// deletionPolicy Retain its group, and these configs, stay in Kafka).
	groupID, clusterName := dlr.Status.GroupID, dlr.Status.ClusterName
	var sq kqv1.ShareQueue
	if err := r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: dlr.Spec.QueueRef.Name}, &sq); err == nil {
		groupID, clusterName = sq.KafkaGroupID(), sq.Spec.ClusterRef.Name
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if groupID == "" || clusterName == "" {
		r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("ShareQueue %s is gone and this route never recorded its group: any %s configs it set stay on the group", dlr.Spec.QueueRef.Name, dlqTopicNameConfig))
		return release()
	}
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: dlr.Namespace, Name: clusterName}, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.event(dlr, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
				fmt.Sprintf("KafkaCluster %s is gone: the %s configs stay on group %s", clusterName, dlqTopicNameConfig, groupID))
			return release()
		}
		return err
	}
	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, &kc)
	if err != nil {
		return giveUp(fmt.Sprintf("cannot build a client for KafkaCluster %s: %v", kc.Name, err))
	}
	del, err := removeDeadLetterConfigs(kctx, cl, groupID, dlr.Status.TopicName)
	if kafka.IsNotShareGroup(err) {
		r.event(dlr, corev1.EventTypeWarning, kqv1.ReasonGroupTypeConflict, "Delete", fmt.Sprintf("%s: its configs were left alone", errMessage(err)))
		return release()
	} else if err != nil {
		return giveUp(fmt.Sprintf("removing the dead-letter configs of group %s on KafkaCluster %s: %v", groupID, kc.Name, err))
	}
	if len(del) > 0 {
		r.event(dlr, corev1.EventTypeNormal, "DeadLetterRouteRemoved", "Delete",
			fmt.Sprintf("removed %s from group %s; topic %s and its dead records are kept", changesOf(del, "group "+groupID), groupID, dlr.Status.TopicName))
	}
	return release()
}

// releaseFinalizer removes the route's finalizer; the reconcile has nothing left to do.
func (r *DeadLetterRouteReconciler) releaseFinalizer(ctx context.Context, dlr *kqv1.DeadLetterRoute) error {
	return removeFinalizer(ctx, r.Client, dlr, RouteFinalizer)
}

// removeDeadLetterConfigs unsets the KIP-1191 configs a route set on a group: the topic name
// only while it still names topicName (a value someone else put there stays), and the
// copy-record switch. It returns what it removed. A group id held by a classic, consumer or
// streams group is not altered: the error is kafka.ErrNotShareGroup.
func removeDeadLetterConfigs(ctx context.Context, cl *kafka.Client, groupID, topicName string) ([]kafka.AlterConfig, error) {
	groupKey := kafka.ResourceKey{Type: kafka.GroupResource, Name: groupID}
	if types, err := cl.OtherGroupTypes(ctx, groupID); err != nil {
		return nil, err
	} else if t := types[groupID]; t != "" {
		return nil, &kafka.Error{Op: "IncrementalAlterConfigs", Resource: "group " + groupID, Err: kafka.ErrNotShareGroup, Message: kafka.NotShareGroupMessage(groupID, t)}
	}
	cfgs, err := cl.DescribeConfigs(ctx, []kafka.ResourceKey{groupKey})
	if err != nil {
		return nil, err
	}
	var del []kafka.AlterConfig
	for _, k := range []string{dlqTopicNameConfig, dlqCopyRecordConfig} {
		e, ok := cfgs[groupKey].Configs[k]
		if ok && e.IsOverride() && (k != dlqTopicNameConfig || e.Value == topicName) {
			del = append(del, kafka.AlterConfig{Name: k, Op: kafka.OpDelete})
		}
	}
	if len(del) == 0 {
		return nil, nil
	}
	res, err := cl.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: groupKey, Configs: del}})
	if err == nil {
		err = res[groupKey]
	}
	if err != nil {
		return nil, err
	}
	return del, nil
}
