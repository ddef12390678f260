package controllers

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// finalize deletes the topic and share group of a deletionPolicy Delete queue, then releases
// the finalizer. Only a topic whose id matches status.topicId is deleted: one recreated by
// someone else is left alone. When the cluster is gone or unreachable for FinalizerTimeout,
// the finalizer is released with a Warning event naming what was left behind.
func (q *queueScope) finalize(ctx context.Context) error {
	sq, r := q.sq, q.r
	if sq.DeletionTimestamp.IsZero() {
		return nil
	}
	if !controllerutil.ContainsFinalizer(sq, CleanupFinalizer) {
		return errDone
	}
	topicName, groupID := sq.KafkaTopicName(), sq.KafkaGroupID()
	release := func() error { return r.releaseFinalizer(ctx, sq) }
	giveUp := func(why string) error {
		if q.waitBeforeAbandoning(r.FinalizerTimeout) {
			return errDone
		}
		r.event(sq, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
			fmt.Sprintf("%s; released the finalizer after %s, leaving topic %s and group %s in Kafka", why, r.FinalizerTimeout, topicName, groupID))
		return release()
	}
	if sq.Spec.DeletionPolicy != kqv1.DeletionPolicyDelete {
		return release()
	}
	if sq.Spec.DeletionProtection {
		return &stallError{Reason: kqv1.ReasonDeletionProtected, Message: fmt.Sprintf("deletionProtection is true: topic %s and group %s are kept and this ShareQueue stays until deletionProtection is set to false (removing the finalizer %s by hand also keeps them)", topicName, groupID, CleanupFinalizer)}
	}
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.event(sq, corev1.EventTypeWarning, "CleanupAbandoned", "Delete",
				fmt.Sprintf("KafkaCluster %s is gone; topic %s and group %s were not deleted", sq.Spec.ClusterRef.Name, topicName, groupID))
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
	// Never delete what another ShareQueue on this cluster still names.
	others, err := r.claimants(ctx, sq, &kc)
	if err != nil {
		return err
	}
	topicShared, groupShared := "", ""
	for _, c := range others {
		who := c.queue.Namespace + "/" + c.queue.Name
		if c.queue.KafkaTopicName() == topicName {
			topicShared = who
		}
		if c.queue.KafkaGroupID() == groupID {
			groupShared = who
		}
	}
	topics, err := cl.DescribeTopics(kctx, topicName)
	if err != nil {
		return giveUp(fmt.Sprintf("cannot reach KafkaCluster %s: %v", kc.Name, err))
	}
	t := topics[topicName]
	switch {
	case topicShared != "":
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonConflict, "Delete", fmt.Sprintf("topic %s is also named by ShareQueue %s: not deleted", topicName, topicShared))
	case t.Err != nil && kafka.IsNotFound(t.Err):
	case t.Err != nil:
		return giveUp(t.Err.Error())
	case sq.Status.TopicID == "" || t.ID != sq.Status.TopicID:
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonTopicIDChanged, "Delete",
			fmt.Sprintf("topic %s has id %s, not the pinned %q: not deleting a topic this ShareQueue does not own", topicName, t.ID, sq.Status.TopicID))
	default:
		res, err := cl.DeleteTopics(kctx, topicName)
		if err == nil {
			err = res[topicName]
		}
		if err != nil {
			return giveUp(fmt.Sprintf("deleting topic %s: %v", topicName, err))
		}
		r.event(sq, corev1.EventTypeNormal, kqv1.EventTopicDeletedByPolicy, "Delete", fmt.Sprintf("deleted topic %s (deletionPolicy Delete)", topicName))
	}
	if groupShared != "" {
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonConflict, "Delete", fmt.Sprintf("group %s is also named by ShareQueue %s: not deleted", groupID, groupShared))
		return release()
	}
	if err := r.deleteGroup(kctx, cl, groupID); kafka.IsNotShareGroup(err) {
		// The id is a classic, consumer or streams group's: its offsets and configs are not ours.
		r.event(sq, corev1.EventTypeWarning, kqv1.ReasonGroupTypeConflict, "Delete", fmt.Sprintf("%s: not deleted, its configs untouched", errMessage(err)))
		return release()
	} else if err != nil {
		return giveUp(err.Error())
	}
	r.event(sq, corev1.EventTypeNormal, "GroupDeleted", "Delete", fmt.Sprintf("deleted share group %s and its configs (deletionPolicy Delete)", groupID))
	return release()
}

// releaseFinalizer removes the cleanup finalizer; the reconcile has nothing left to do.
func (r *ShareQueueReconciler) releaseFinalizer(ctx context.Context, sq *kqv1.ShareQueue) error {
	return removeFinalizer(ctx, r.Client, sq, CleanupFinalizer)
}

// deleteGroup deletes the share group and every group config override it had (the configs
// outlive a group that never had members). A group id held by a group of another type is
// neither deleted nor altered: the error is kafka.ErrNotShareGroup (kafka.IsNotShareGroup).
func (r *ShareQueueReconciler) deleteGroup(ctx context.Context, cl *kafka.Client, groupID string) error {
	res, err := cl.DeleteShareGroups(ctx, groupID)
	if err == nil {
		err = res[groupID]
	}
	if kafka.IsNotShareGroup(err) {
		return err
	}
	if err != nil && !kafka.IsUnsupported(err) {
		return fmt.Errorf("deleting share group %s: %w", groupID, err)
	}
	key := kafka.ResourceKey{Type: kafka.GroupResource, Name: groupID}
	cfgs, err := cl.DescribeConfigs(ctx, []kafka.ResourceKey{key})
	if err != nil {
		return err
	}
	rc := cfgs[key]
	if rc.Err != nil {
		return nil
	}
	var dels []kafka.AlterConfig
	for name, e := range rc.Configs {
		if e.IsOverride() {
			dels = append(dels, kafka.AlterConfig{Name: name, Op: kafka.OpDelete})
		}
	}
	if len(dels) == 0 {
		return nil
	}
	out, err := cl.IncrementalAlterConfigs(ctx, []kafka.Alteration{{Resource: key, Configs: dels}})
	if err == nil {
		err = out[key]
	}
	return err
}

// errMessage is a kafka.Error's broker or operator message when it has one, else err's text.
func errMessage(err error) string {
	var ke *kafka.Error
	if errors.As(err, &ke) && ke.Message != "" {
		return ke.Message
	}
	return err.Error()
}
