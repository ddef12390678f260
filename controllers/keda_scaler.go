package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/scaler"
)

// ScalerLabel marks the Pod of the manager that serves KEDA's external scaler API (the
// leader): the chart's scaler Service selects it, so KEDA never reaches a standby, which has
// no depth rounds to answer from. A manager removes it from its own Pod when it starts and
// sets it once it leads and serves.
const ScalerLabel = "kafkaqueues.io/keda-scaler"

// ScalerServing is ScalerLabel's value on the serving Pod.
const ScalerServing = "serving"

// KEDAScalerOptions turn on the external scaler (the manager's --keda-scaler-* flags).
type KEDAScalerOptions struct {
	// BindAddress is where the gRPC server listens (e.g. ":9090"); empty turns it off.
	BindAddress string
	// CertDir holds tls.crt and tls.key (and ca.crt to require client certificates); empty
	// serves without TLS.
	CertDir string
	// PodName and PodNamespace name the manager's own Pod (the downward API's POD_NAME and
	// POD_NAMESPACE); empty outside a Pod, where nothing is labelled.
	PodName, PodNamespace string
}

// setupKEDAScaler adds the scaler's server (leader only) and the label bookkeeping of the
// manager's Pod, and returns the store the depth poller fills (nil when the scaler is off).
func setupKEDAScaler(mgr ctrl.Manager, opts KEDAScalerOptions, depthInterval, kafkaTimeout time.Duration) (*scaler.Store, error) {
	if opts.BindAddress == "" {
		return nil, nil
	}
	if depthInterval <= 0 {
		return nil, fmt.Errorf("--keda-scaler-bind-address %s needs the depth poller: --depth-interval is 0", opts.BindAddress)
	}
	if opts.CertDir != "" {
		if err := scaler.CheckCertDir(opts.CertDir); err != nil {
			return nil, err
		}
	}
	store := scaler.NewStore()
	label := func(value any) func(context.Context) error {
		return func(ctx context.Context) error {
			if opts.PodName == "" || opts.PodNamespace == "" {
				return nil
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: opts.PodName, Namespace: opts.PodNamespace}}
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, ScalerLabel, value)
			return mgr.GetClient().Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
		}
	}
	// A Pod restarted after losing the lease keeps its labels: unmark it before the manager
	// starts, so the mark can only follow this process's own election.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := label("null")(ctx); err != nil {
		ctrl.Log.WithName("keda-scaler").Error(err, "removing the scaler label from this manager's Pod")
	}
	return store, mgr.Add(&scaler.Runnable{
		// A round reads the clusters one after another, each within kafkaTimeout: a cluster
		// that hangs delays the others' next reading by that much, which is not staleness.
		Server:      &scaler.Server{Store: store, MaxAge: 3*depthInterval + kafkaTimeout, Explain: explainUnread(mgr.GetClient())},
		BindAddress: opts.BindAddress,
		CertDir:     opts.CertDir,
		OnServing:   label(fmt.Sprintf("%q", ScalerServing)),
	})
}

// explainUnread says, from the manager's cache, why the depth poller has no reading of queue
// q (the scaler's NotFound answer): the one cause that applies, not a list.
func explainUnread(c client.Reader) func(context.Context, types.NamespacedName) string {
	return func(ctx context.Context, q types.NamespacedName) string {
		var sq kqv1.ShareQueue
		switch err := c.Get(ctx, q, &sq); {
		case apierrors.IsNotFound(err):
			return "this manager holds no ShareQueue of that name: check the name and namespace, or, if it exists, it is outside this manager's watchNamespaces or shard (--watch-label-selector): point scalerAddress at the scaler of the manager that holds it"
		case err != nil:
			return fmt.Sprintf("reading it from the manager's cache: %v", err)
		case !sq.DeletionTimestamp.IsZero():
			return "it is being deleted"
		case heldBackMode(sq.Annotations):
			return fmt.Sprintf("it is held back by its annotation %s=%q, so the operator does not touch it", kqv1.ReconcileAnnotation, sq.Annotations[kqv1.ReconcileAnnotation])
		case sq.Status.TopicName == "" || sq.Status.GroupID == "":
			return "its status has no topic and group yet: it has not been reconciled (see its Ready condition)"
		}
		var kc kqv1.KafkaCluster
		switch err := c.Get(ctx, types.NamespacedName{Namespace: q.Namespace, Name: sq.Spec.ClusterRef.Name}, &kc); {
		case apierrors.IsNotFound(err):
			return fmt.Sprintf("its KafkaCluster %s (spec.clusterRef.name) does not exist in namespace %s", sq.Spec.ClusterRef.Name, q.Namespace)
		case err != nil:
			return fmt.Sprintf("reading its KafkaCluster %s from the manager's cache: %v", sq.Spec.ClusterRef.Name, err)
		case !conditionIs(kc.Status.Conditions, kqv1.ConditionConnected, metav1.ConditionTrue):
			return fmt.Sprintf("its KafkaCluster %s is not connected (see its Connected condition); queues are read only on connected clusters", sq.Spec.ClusterRef.Name)
		}
		return "the depth poller's first round since the queue became readable has not finished yet; try again after one depth interval"
	}
}
