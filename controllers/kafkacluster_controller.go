package controllers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// KafkaClusterReconciler probes one Kafka cluster per KafkaCluster: brokers, finalized
// features, share-group bounds and the __share_group_state topic; it finalizes share.version
// under featurePolicy Finalize.
type KafkaClusterReconciler struct {
	client.Client
	// APIReader reads Secrets uncached (the manager does not watch every Secret).
	APIReader client.Reader
	Pool      *kafka.Pool
	Recorder  events.EventRecorder
	// ProbeInterval is how often a cluster is re-probed when nothing else triggers it.
	ProbeInterval time.Duration
	// KafkaTimeout bounds the Kafka requests of one reconcile.
	KafkaTimeout time.Duration
	// Concurrency is the number of parallel reconciles (MaxConcurrentReconciles).
	Concurrency int
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile probes the cluster and reports it.
func (r *KafkaClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, req.NamespacedName, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pool.Remove(req.String())
			featureLevel.DeletePartialMatch(map[string]string{"namespace": req.Namespace, "name": req.Name})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !kc.DeletionTimestamp.IsZero() {
		r.Pool.Remove(clusterKey(&kc))
		return ctrl.Result{}, nil
	}
	if m := reconcileMode(kc.Annotations); m == kqv1.ReconcilePaused || m == reconcileInvalid {
		return ctrl.Result{}, nil
	}
	original := kc.DeepCopy()
	gen := kc.Generation

	kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
	defer cancel()
	cl, err := clientFor(kctx, r.APIReader, r.Pool, &kc)
	var se *secretError
	if errors.As(err, &se) {
		reason := kqv1.ReasonSecretNotFound
		if se.invalid {
			reason = kqv1.ReasonSecretInvalid
		}
		r.notConnected(&kc, reason, se.Error(), true)
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.patchStatus(ctx, original, &kc)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	probe, err := r.probe(kctx, cl)
	if err != nil {
		logger.Info("probe failed", "error", err.Error())
		r.notConnected(&kc, kqv1.ReasonConnectionFailed, fmt.Sprintf("cannot reach the cluster at %v: %v", kc.Spec.BootstrapServers, err), false)
		if perr := r.patchStatus(ctx, original, &kc); perr != nil {
			return ctrl.Result{}, perr
		}
		return ctrl.Result{}, err // exponential backoff
	}

	status, conds, act := planCluster(&kc, probe)
	if act.FinalizeShareVersion > 0 {
		from := probe.Info.FeatureLevel(shareVersionFeature)
		if err := cl.UpdateFeature(kctx, shareVersionFeature, act.FinalizeShareVersion); err != nil {
			conds.ShareGroups = condInput{boolStatus(from >= 1), kqv1.ReasonFeatureUpdateFailed,
				fmt.Sprintf("UpdateFeatures share.version %d -> %d failed: %v", from, act.FinalizeShareVersion, err)}
			r.event(&kc, corev1.EventTypeWarning, kqv1.ReasonFeatureUpdateFailed, "FinalizeFeature", conds.ShareGroups.Message)
		} else {
			msg := fmt.Sprintf("share.version raised from %d to %d with UpdateFeatures (upgrade)", from, act.FinalizeShareVersion)
			r.event(&kc, corev1.EventTypeNormal, kqv1.ReasonFeatureFinalized, "FinalizeFeature", msg)
			logger.Info("finalized feature", "feature", shareVersionFeature, "from", from, "to", act.FinalizeShareVersion)
			// Re-read so status reports the level the brokers now advertise.
			if again, err := r.probe(kctx, cl); err == nil {
				status, conds, _ = planCluster(&kc, again)
				if again.Info.FeatureLevel(shareVersionFeature) < act.FinalizeShareVersion {
					conds.ShareGroups = condInput{conds.ShareGroups.Status, kqv1.ReasonProgressing, msg + "; waiting for brokers to report it"}
				}
			}
		}
	}

	if len(act.Reassign) > 0 {
		if err := cl.AlterPartitionAssignments(kctx, ShareStateTopic, act.Reassign); err != nil {
			conds.ShareState = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("reassigning %s: %v", ShareStateTopic, err)}
			r.event(&kc, corev1.EventTypeWarning, kqv1.ReasonKafkaRejected, "ReassignPartitions", conds.ShareState.Message)
		} else {
			r.event(&kc, corev1.EventTypeNormal, kqv1.ReasonShareStateReassigning, "ReassignPartitions", conds.ShareState.Message)
			logger.Info("reassigning share-state partitions", "topic", ShareStateTopic, "partitions", len(act.Reassign))
		}
	}
	if act.SetStateMinISR != nil {
		key := kafka.ResourceKey{Type: kafka.TopicResource, Name: ShareStateTopic}
		res, err := cl.IncrementalAlterConfigs(kctx, []kafka.Alteration{{Resource: key, Configs: []kafka.AlterConfig{
			{Name: "min.insync.replicas", Op: kafka.OpSet, Value: strconv.Itoa(int(*act.SetStateMinISR))}}}})
		if err == nil {
			err = res[key]
		}
		if err != nil {
			conds.ShareState = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("setting %s min.insync.replicas: %v", ShareStateTopic, err)}
			r.event(&kc, corev1.EventTypeWarning, kqv1.ReasonKafkaRejected, "AlterConfigs", conds.ShareState.Message)
		} else {
			r.event(&kc, corev1.EventTypeNormal, "ShareStateMinISRSet", "AlterConfigs", conds.ShareState.Message)
		}
	}

	for _, f := range status.FinalizedFeatures {
		featureLevel.WithLabelValues(kc.Namespace, kc.Name, f.Name).Set(float64(f.Level))
	}
	conditions := kc.Status.Conditions
	kc.Status = status
	kc.Status.Conditions = conditions
	kc.Status.ObservedGeneration = gen
	setCondition(&kc.Status.Conditions, kqv1.ConditionConnected, conds.Connected, gen)
	setCondition(&kc.Status.Conditions, kqv1.ConditionShareGroupsEnabled, conds.ShareGroups, gen)
	setCondition(&kc.Status.Conditions, kqv1.ConditionShareStateReplicated, conds.ShareState, gen)
	ready, stalled := clusterReady(conds)
	if conds.ShareState.Reason == kqv1.ReasonShareStateBrokerMissing {
		stalled = true
	}
	setKstatus(&kc.Status.Conditions, ready, stalled, gen)
	if err := r.patchStatus(ctx, original, &kc); err != nil {
		return ctrl.Result{}, err
	}
	if conds.ShareGroups.Reason == kqv1.ReasonProgressing || conds.ShareState.Reason == kqv1.ReasonProgressing ||
		conds.ShareState.Reason == kqv1.ReasonShareStateReassigning {
		return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: r.ProbeInterval}, nil
}

// clusterReady summarises the cluster conditions into Ready and whether the user must act.
func clusterReady(c clusterConditions) (condInput, bool) {
	for _, in := range []condInput{c.Connected, c.ShareGroups, c.ShareState} {
		if in.Status != metav1.ConditionTrue {
			stalled := in.Reason == kqv1.ReasonShareGroupsDisabled || in.Reason == kqv1.ReasonFeatureUnsupported ||
				in.Reason == kqv1.ReasonShareStateUncreatable || in.Reason == kqv1.ReasonFeatureUpdateFailed
			return condInput{metav1.ConditionFalse, in.Reason, in.Message}, stalled
		}
	}
	return condInput{metav1.ConditionTrue, kqv1.ReasonReady, c.Connected.Message + "; " + c.ShareGroups.Message}, false
}

func (r *KafkaClusterReconciler) notConnected(kc *kqv1.KafkaCluster, reason, msg string, stalled bool) {
	gen := kc.Generation
	kc.Status.ObservedGeneration = gen
	in := condInput{metav1.ConditionFalse, reason, msg}
	if meta := kc.Status.Conditions; findCondition(meta, kqv1.ConditionConnected) == nil ||
		findCondition(meta, kqv1.ConditionConnected).Reason != reason {
		r.event(kc, corev1.EventTypeWarning, reason, "Probe", msg)
	}
	setCondition(&kc.Status.Conditions, kqv1.ConditionConnected, in, gen)
	setKstatus(&kc.Status.Conditions, in, stalled, gen)
}

// probe reads everything planCluster needs.
func (r *KafkaClusterReconciler) probe(ctx context.Context, cl *kafka.Client) (clusterProbe, error) {
	var pr clusterProbe
	info, err := cl.DescribeCluster(ctx)
	if err != nil {
		return pr, err
	}
	pr.Info = info
	// Bounds are read-only broker configs (restart to change); brokers should agree, and the
	// lowest id stands for all.
	bc, err := cl.DescribeBrokerConfigs(ctx, info.Brokers[0].ID)
	if err != nil {
		return pr, err
	}
	pr.BrokerConfigs = bc
	topics, err := cl.DescribeTopics(ctx, ShareStateTopic)
	if err != nil {
		return pr, err
	}
	pr.StateTopic = topics[ShareStateTopic]
	if pr.StateTopic.Err == nil {
		key := kafka.ResourceKey{Type: kafka.TopicResource, Name: ShareStateTopic}
		cfgs, err := cl.DescribeConfigs(ctx, []kafka.ResourceKey{key})
		if err != nil {
			return pr, err
		}
		if rc := cfgs[key]; rc.Err == nil {
			if v, err := strconv.Atoi(rc.Configs["min.insync.replicas"].Value); err == nil {
				n := int32(v)
				pr.StateTopicMinISR = &n
			}
		}
		if pr.Reassigning, err = cl.ReassigningPartitions(ctx, ShareStateTopic); err != nil {
			return pr, err
		}
	}
	return pr, nil
}

func (r *KafkaClusterReconciler) patchStatus(ctx context.Context, original, kc *kqv1.KafkaCluster) error {
	if equality.Semantic.DeepEqual(original.Status, kc.Status) {
		return nil
	}
	return r.Status().Patch(ctx, kc, client.MergeFrom(original))
}

func (r *KafkaClusterReconciler) event(obj *kqv1.KafkaCluster, typ, reason, action, msg string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, typ, reason, action, "%s", msg)
	}
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

// SetupWithManager registers the controller. Failed probes back off exponentially from 1s to
// 2 minutes.
func (r *KafkaClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ProbeInterval == 0 {
		r.ProbeInterval = 3 * time.Minute
	}
	if r.KafkaTimeout == 0 {
		r.KafkaTimeout = 30 * time.Second
	}
	if r.Concurrency <= 0 {
		r.Concurrency = 4
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&kqv1.KafkaCluster{}, builderWithGenerationOrAnnotationChange()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Concurrency,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Named("kafkacluster").
		Complete(r)
}
