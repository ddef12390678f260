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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/connection"
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
	// Scope.Selector picks the KafkaClusters this manager probes (the others are only read).
	Scope Scope
	// gate is the shared per-cluster backoff of the queues and routes (kafka_gate.go): the
	// probe reports to it (its own schedule is unchanged), and gateWake carries the clusters
	// to probe at once because a queue or route found the brokers back.
	gate     *kafkaGate
	gateWake <-chan event.GenericEvent
}

// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=kafkaqueues.io,resources=kafkaclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// clusterScope is one KafkaCluster reconcile: the probe and the actions taken.
type clusterScope struct {
	*scope
	r      *KafkaClusterReconciler
	kc     *kqv1.KafkaCluster
	kctx   context.Context
	cancel context.CancelFunc
	cl     *kafka.Client
	probe  clusterProbe
	status kqv1.KafkaClusterStatus
	conds  clusterConditions
	act    clusterAction
}

// Reconcile probes the cluster, makes the changes its policies ask for, and reports it. It
// reads as its steps; the deferred summarize writes status once and picks the requeue.
func (r *KafkaClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, err error) {
	var kc kqv1.KafkaCluster
	if err := r.Get(ctx, req.NamespacedName, &kc); err != nil {
		if apierrors.IsNotFound(err) {
			r.Pool.Remove(req.String())
			if r.gate != nil {
				r.gate.forget(req.String())
			}
			featureLevel.DeletePartialMatch(map[string]string{"namespace": req.Namespace, "name": req.Name})
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !r.Scope.inScope(&kc) {
		// Another shard's: cached so this shard's queues can read it, probed by its own.
		return ctrl.Result{}, nil
	}
	c := &clusterScope{r: r, kc: &kc, cancel: func() {}}
	c.scope = newScope(&kc, &kc.Status.Conditions, func(a, b client.Object) bool {
		return equality.Semantic.DeepEqual(a.(*kqv1.KafkaCluster).Status, b.(*kqv1.KafkaCluster).Status)
	})
	defer func() { c.cancel() }()
	defer func() { res, err = c.summarize(ctx, r.Client, r.Recorder, c.waited, err) }()
	return ctrl.Result{}, c.run(ctx,
		step{"deleted", c.deleted},
		step{"paused", c.paused},
		step{"connect", c.connect},
		step{"probe", c.observe},
		step{"plan", c.planChanges},
		step{"apply", c.apply},
		step{"status", c.report},
	)
}

// deleted: a KafkaCluster being deleted gives up its pooled client; nothing is reported.
func (c *clusterScope) deleted(context.Context) error {
	if c.kc.DeletionTimestamp.IsZero() {
		return nil
	}
	c.r.Pool.Remove(clusterKey(c.kc))
	return errDone
}

// paused: annotation Paused (or an unknown mode) probes nothing.
func (c *clusterScope) paused(context.Context) error {
	m := reconcileMode(c.kc.Annotations)
	if m != kqv1.ReconcilePaused && m != reconcileInvalid {
		return nil
	}
	pausedStatus(&c.kc.Status.Conditions, m, c.kc.Annotations[kqv1.ReconcileAnnotation], c.gen)
	c.kc.Status.ObservedGeneration = c.gen
	return errDone
}

// connect takes the cluster's Kafka client. A missing or unusable Secret is stalled (the
// user must fix it); it is checked again every 30s, as Secrets are not watched.
func (c *clusterScope) connect(ctx context.Context) error {
	c.kctx, c.cancel = context.WithTimeout(ctx, c.r.KafkaTimeout)
	cl, err := clientFor(c.kctx, c.r.APIReader, c.r.Pool, c.kc)
	var se *connection.SecretError
	if errors.As(err, &se) {
		reason := kqv1.ReasonSecretNotFound
		if se.Invalid() {
			reason = kqv1.ReasonSecretInvalid
		}
		notConnected(&c.kc.Status, c.gen, reason, se.Error())
		return &stallError{Reason: reason, Message: se.Error(), After: 30 * time.Second}
	}
	if err != nil {
		return err
	}
	c.cl = cl
	return nil
}

// caSecret reads the Secret spec.tls.caSecretRef names (nil when there is none or it cannot
// be read), for tlsTrustHint.
func (c *clusterScope) caSecret(ctx context.Context) *corev1.Secret {
	t := c.kc.Spec.TLS
	if t == nil || t.CASecretRef == nil {
		return nil
	}
	var s corev1.Secret
	if err := c.r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.kc.Namespace, Name: t.CASecretRef.Name}, &s); err != nil {
		return nil
	}
	return &s
}

// observe is the probe: one round of reads (clusterProbe).
func (c *clusterScope) observe(ctx context.Context) error {
	probe, err := c.r.probe(c.kctx, c.cl)
	if err != nil {
		err = withAuthError(c.cl, err)
		log.FromContext(ctx).Info("probe failed", "error", err.Error())
		if c.r.gate != nil && kafka.IsUnreachable(err) {
			c.r.gate.failure(clusterKey(c.kc), gateWaiter{}, err)
		}
		msg := fmt.Sprintf("cannot reach the cluster at %v: %v", c.kc.Spec.BootstrapServers, err)
		if hint := tlsTrustHint(err, c.kc, c.caSecret(ctx)); hint != "" {
			msg += "; " + hint
		}
		// Exponential backoff.
		return &waitError{Reason: kqv1.ReasonConnectionFailed, Message: msg, Cause: err}
	}
	c.probe = probe
	if c.r.gate != nil {
		c.r.gate.success(clusterKey(c.kc))
	}
	return nil
}

// planChanges runs the pure plan (planCluster).
func (c *clusterScope) planChanges(context.Context) error {
	c.status, c.conds, c.act = planCluster(c.kc, c.probe)
	return nil
}

// apply makes the changes the policies ask for: share.version finalized (featurePolicy
// Finalize), __share_group_state reassigned and its min.insync.replicas set
// (shareStateTopic.policy Manage).
func (c *clusterScope) apply(ctx context.Context) error {
	logger := log.FromContext(ctx)
	kc, cl, kctx, act, r := c.kc, c.cl, c.kctx, c.act, c.r
	if act.FinalizeShareVersion > 0 {
		from := c.probe.Info.FeatureLevel(shareVersionFeature)
		if err := cl.UpdateFeature(kctx, shareVersionFeature, act.FinalizeShareVersion); err != nil {
			c.conds.ShareGroups = condInput{boolStatus(from >= 1), kqv1.ReasonFeatureUpdateFailed,
				fmt.Sprintf("UpdateFeatures share.version %d -> %d failed: %v", from, act.FinalizeShareVersion, err)}
			c.warn(r.Recorder, kqv1.ReasonFeatureUpdateFailed, "FinalizeFeature", c.conds.ShareGroups.Message)
		} else {
			msg := fmt.Sprintf("share.version raised from %d to %d with UpdateFeatures (upgrade)", from, act.FinalizeShareVersion)
			r.event(kc, corev1.EventTypeNormal, kqv1.ReasonFeatureFinalized, "FinalizeFeature", msg)
			logger.Info("finalized feature", "feature", shareVersionFeature, "from", from, "to", act.FinalizeShareVersion)
			// Re-read so status reports the level the brokers now advertise.
			if again, err := r.probe(kctx, cl); err == nil {
				c.status, c.conds, _ = planCluster(kc, again)
				if again.Info.FeatureLevel(shareVersionFeature) < act.FinalizeShareVersion {
					c.conds.ShareGroups = condInput{c.conds.ShareGroups.Status, kqv1.ReasonProgressing, msg + "; waiting for brokers to report it"}
				}
			}
		}
	}
	if len(act.Reassign) > 0 {
		if err := cl.AlterPartitionAssignments(kctx, ShareStateTopic, act.Reassign); err != nil {
			c.conds.ShareState = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("reassigning %s: %v", ShareStateTopic, err)}
			c.warn(r.Recorder, kqv1.ReasonKafkaRejected, "ReassignPartitions", c.conds.ShareState.Message)
		} else {
			r.event(kc, corev1.EventTypeNormal, kqv1.ReasonShareStateReassigning, "ReassignPartitions", c.conds.ShareState.Message)
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
			c.conds.ShareState = condInput{metav1.ConditionFalse, kqv1.ReasonKafkaRejected, fmt.Sprintf("setting %s min.insync.replicas: %v", ShareStateTopic, err)}
			c.warn(r.Recorder, kqv1.ReasonKafkaRejected, "AlterConfigs", c.conds.ShareState.Message)
		} else {
			r.event(kc, corev1.EventTypeNormal, "ShareStateMinISRSet", "AlterConfigs", c.conds.ShareState.Message)
		}
	}
	return nil
}

// report runs the pure status step (clusterStatus) and picks the requeue: soon while a
// change is landing, else at the next probe.
func (c *clusterScope) report(context.Context) error {
	for _, f := range c.status.FinalizedFeatures {
		featureLevel.WithLabelValues(c.kc.Namespace, c.kc.Name, f.Name).Set(float64(f.Level))
	}
	c.setReady(clusterStatus(&c.kc.Status, c.gen, c.status, c.conds))
	if c.conds.ShareGroups.Reason == kqv1.ReasonProgressing || c.conds.ShareState.Reason == kqv1.ReasonProgressing ||
		c.conds.ShareState.Reason == kqv1.ReasonShareStateReassigning {
		c.requeueAfter = 2 * time.Second
	} else {
		c.requeueAfter = c.r.ProbeInterval
	}
	return nil
}

// waited reports a cluster that could not be probed: Connected and Ready say why.
func (c *clusterScope) waited(w *waitError) condInput {
	return notConnected(&c.kc.Status, c.gen, w.Reason, w.Message)
}

// clusterStatus replaces the probed fields of st with probed, keeps its conditions, sets
// Connected, ShareGroupsEnabled and ShareStateReplicated, and returns Ready and whether the
// user must act. Pure.
func clusterStatus(st *kqv1.KafkaClusterStatus, gen int64, probed kqv1.KafkaClusterStatus, conds clusterConditions) (condInput, bool) {
	conditions := st.Conditions
	*st = probed
	st.Conditions = conditions
	st.ObservedGeneration = gen
	setCondition(&st.Conditions, kqv1.ConditionConnected, conds.Connected, gen)
	setCondition(&st.Conditions, kqv1.ConditionShareGroupsEnabled, conds.ShareGroups, gen)
	setCondition(&st.Conditions, kqv1.ConditionShareStateReplicated, conds.ShareState, gen)
	ready, stalled := clusterReady(conds)
	if conds.ShareState.Reason == kqv1.ReasonShareStateBrokerMissing {
		stalled = true
	}
	return ready, stalled
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

// notConnected sets Connected to False with reason and msg, and returns Ready. Pure.
func notConnected(st *kqv1.KafkaClusterStatus, gen int64, reason, msg string) condInput {
	st.ObservedGeneration = gen
	in := condInput{metav1.ConditionFalse, reason, msg}
	setCondition(&st.Conditions, kqv1.ConditionConnected, in, gen)
	return in
}

// probe reads everything planCluster needs.
func (r *KafkaClusterReconciler) probe(ctx context.Context, cl *kafka.Client) (clusterProbe, error) {
	var pr clusterProbe
	// The pooled client's connections stay authenticated after the credentials stop working.
	if err := cl.CheckCredentials(ctx); err != nil {
		return pr, err
	}
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

func (r *KafkaClusterReconciler) event(obj *kqv1.KafkaCluster, typ, reason, action, msg string) {
	emitEvent(r.Recorder, obj, typ, reason, action, msg)
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
	b := ctrl.NewControllerManagedBy(mgr)
	if r.gateWake != nil {
		b = b.WatchesRawSource(source.Channel(r.gateWake, &handler.EnqueueRequestForObject{}))
	}
	return b.
		For(&kqv1.KafkaCluster{}, builderWithGenerationOrAnnotationChange()).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Concurrency,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](time.Second, 2*time.Minute),
		}).
		Named("kafkacluster").
		Complete(r)
}
