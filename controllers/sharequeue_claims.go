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
	"sigs.k8s.io/controller-runtime/pkg/event"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
)

// Ownership across managers. One manager decides among the ShareQueues it caches (claimants,
// ownerOf: the oldest owns). Managers that cannot see each other's queues — installs watching
// other namespaces, shards with other label selectors, Kubernetes clusters sharing one Kafka
// cluster — also write, before any Kafka change for a queue, a claim for its topic and its
// group to the claims topic (--claims-topic, kafka.Claims) and read every other manager's
// there. The same rule decides: among live claimants the oldest by creationTimestamp owns,
// ties broken by namespace/name. A claim stays until its queue is gone: a manager that sees
// the queue deleted releases it, and a claim that blocks another queue is checked against
// the apiserver and released when its queue no longer exists (NotFound, or another UID).

// ReasonClaimsUnavailable is the Warning Event of a queue whose manager may not use the claims
// topic (Kafka authorization): ownership is then checked among the watched queues only.
const ReasonClaimsUnavailable = "ClaimsUnavailable"

// claimsOf are the claims sq makes: its topic, its group and its topic's collision name.
func claimsOf(sq *kqv1.ShareQueue) []kafka.Claim {
	out := make([]kafka.Claim, 0, len(claimKeys))
	for _, k := range claimKeys {
		if name := k.of(sq); name != "" {
			out = append(out, kafka.Claim{Kind: k.kind, Name: name})
		}
	}
	return out
}

func claimantOf(sq *kqv1.ShareQueue, manager string) kafka.Claimant {
	return kafka.Claimant{Namespace: sq.Namespace, Name: sq.Name, UID: string(sq.UID), Created: sq.CreationTimestamp.UTC(), Manager: manager}
}

// claimedBy is a claim as a claimant ShareQueue (only its metadata is known) of one of
// sq's names, for ownerOf.
func claimedBy(c kafka.Claim, sq *kqv1.ShareQueue) claimant {
	what := string(c.Kind) + " " + c.Name
	for _, k := range claimKeys {
		if k.kind == c.Kind {
			what = k.claimed(sq, nil)
		}
	}
	return claimant{what: what, viaClaims: true, queue: &kqv1.ShareQueue{ObjectMeta: metav1.ObjectMeta{
		Namespace: c.Namespace, Name: c.Claimant.Name, UID: types.UID(c.UID), CreationTimestamp: metav1.NewTime(c.Created),
	}}}
}

// kafkaOwner is checkOwnership's cross-manager half, run when no queue this manager caches
// owns sq's names: it returns the older live claimant recorded in the claims topic, if any,
// after recording sq's own claims (so a younger queue elsewhere yields to sq). Nil, nil: sq
// owns its topic and group. Claims of queues that no longer exist are released on the way.
func (q *queueScope) kafkaOwner(ctx context.Context) (*claimant, error) {
	r := q.r
	view, err := q.cl.Claims(q.kctx, r.ClaimsTopic, r.claimChanged)
	if kafka.IsAuthorization(err) {
		// The principal may not use the claims topic (ACLs not granted yet, e.g. right after
		// an upgrade): the queue goes on with ownership among the queues this manager sees, and
		// says so, rather than stopping every queue of the cluster.
		r.event(q.sq, corev1.EventTypeWarning, ReasonClaimsUnavailable, "Claim", fmt.Sprintf("the claims topic %s (--claims-topic) cannot be used: %v; ownership of topic %s and group %s is checked only among the ShareQueues this manager watches. Grant the manager's principal Create, Describe, Read and Write on topic %s, or set --claims-topic=\"\" (chart: manager.claimsTopic) to turn the check off", r.ClaimsTopic, err, q.sq.Status.TopicName, q.sq.Status.GroupID, r.ClaimsTopic))
		return nil, nil
	}
	if err != nil {
		return nil, &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("reading the claims topic %s (--claims-topic), where managers record which ShareQueue owns a topic and group: %v", r.ClaimsTopic, err), Cause: err}
	}
	if owner, err := q.olderClaim(ctx, view); owner != nil || err != nil {
		return owner, err
	}
	if err := view.Ensure(q.kctx, claimantOf(q.sq, r.ManagerName), claimsOf(q.sq)...); kafka.IsAuthorization(err) {
		r.event(q.sq, corev1.EventTypeWarning, ReasonClaimsUnavailable, "Claim", fmt.Sprintf("this queue's claim cannot be written to the claims topic %s: %v; managers that do not watch this queue will not see it. Grant the manager's principal Write on topic %s", r.ClaimsTopic, err, r.ClaimsTopic))
		return q.olderClaim(ctx, view)
	} else if err != nil {
		return nil, &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("recording this queue's claim on topic %s and group %s in the claims topic %s: %v", q.sq.Status.TopicName, q.sq.Status.GroupID, r.ClaimsTopic, err), Cause: err}
	}
	// An older queue's claim may have landed between the check and ours.
	return q.olderClaim(ctx, view)
}

// olderClaim returns the oldest live claimant, older than sq, of sq's topic or group in the
// claims view. Claims of queues this manager caches were weighed by ownerOf already; the rest
// are checked against the apiserver, and released when their queue is gone. A claimant the
// manager may not read (another install's namespace) counts as live.
func (q *queueScope) olderClaim(ctx context.Context, view *kafka.Claims) (*claimant, error) {
	sq := q.sq
	var found []claimant
	for _, mine := range claimsOf(sq) {
		for _, c := range view.Of(mine.Kind, mine.Name) {
			if c.UID == string(sq.UID) {
				continue
			}
			cand := claimedBy(c, sq)
			if !older(cand.queue, sq) {
				continue
			}
			live, err := q.r.claimLive(ctx, c)
			if err != nil {
				return nil, err
			}
			if !live {
				if err := view.Release(q.kctx, c); err != nil {
					return nil, &waitError{Reason: kqv1.ReasonKafkaUnavailable, Message: fmt.Sprintf("releasing the claim of deleted ShareQueue %s/%s in the claims topic %s: %v", c.Namespace, c.Claimant.Name, view.Topic(), err), Cause: err}
				}
				continue
			}
			found = append(found, cand)
		}
	}
	return ownerOf(sq, found), nil
}

// claimLive reports whether the claimant ShareQueue of c still exists and is not being
// deleted (read from the apiserver: it may be outside this manager's cache). Forbidden
// (another install's namespace) counts as live.
func (r *ShareQueueReconciler) claimLive(ctx context.Context, c kafka.Claim) (bool, error) {
	var sq kqv1.ShareQueue
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Claimant.Name}, &sq)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsForbidden(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(sq.UID) == c.UID && sq.DeletionTimestamp.IsZero(), nil
}

// releaseClaimsOf releases, on every cluster this manager has a claims view of, the claims
// of ShareQueue key once the apiserver confirms it is gone (a queue that only left this
// manager's cache — relabelled to another shard — keeps its claims). Best effort: a claim
// left behind is released later by whichever queue it blocks (olderClaim).
func (r *ShareQueueReconciler) releaseClaimsOf(ctx context.Context, key types.NamespacedName) {
	if r.ClaimsTopic == "" {
		return
	}
	for _, cl := range r.Pool.Clients() {
		view := cl.ClaimsView(r.ClaimsTopic)
		if view == nil {
			continue
		}
		var stale []kafka.Claim
		for _, c := range view.ByQueue(key.Namespace, key.Name) {
			if live, err := r.claimLive(ctx, c); err == nil && !live {
				stale = append(stale, c)
			}
		}
		if len(stale) == 0 {
			continue
		}
		kctx, cancel := context.WithTimeout(ctx, r.KafkaTimeout)
		if err := view.Release(kctx, stale...); err != nil {
			ctrl.LoggerFrom(ctx).Info("releasing the claims of a deleted ShareQueue failed; a queue they block releases them later", "claimsTopic", r.ClaimsTopic, "error", err.Error())
		}
		cancel()
	}
}

// claimChanged (kafka.ClaimChange) re-queues the queues this manager caches that name the
// claimed topic or group, other than the claimant: one may now have to yield (an older
// claim) or may take over (a release).
func (r *ShareQueueReconciler) claimChanged(c kafka.Claim, _ bool) {
	var list kqv1.ShareQueueList
	for _, k := range claimKeys {
		if k.kind == c.Kind {
			if err := r.List(context.Background(), &list, client.MatchingFields{k.index: c.Name}); err != nil {
				return
			}
		}
	}
	for i := range list.Items {
		if string(list.Items[i].UID) == c.UID {
			continue
		}
		select {
		case r.claimsChanged <- event.GenericEvent{Object: &list.Items[i]}:
		case <-r.stopping:
			return
		}
	}
}

// sweepClaims releases, on the Kafka cluster of each KafkaCluster in the watched namespaces,
// the claims of queues in those namespaces that no longer exist. A queue deleted while no
// manager of this release ran (a rollout, a crash) leaves its claims behind: no reconcile
// sees it NotFound, and managers of other releases, which may not read the namespace, count
// such a claim as live, so a queue of theirs naming the same topic would stay in Conflict.
// Only namespace-scoped managers sweep (a manager that reads every namespace releases a
// stale claim as soon as it blocks one of its queues, olderClaim). Each cluster is swept once
// per run, retried each minute until it succeeds; clusters created later are swept too.
func (r *ShareQueueReconciler) sweepClaims(ctx context.Context) {
	watched := map[string]bool{}
	for _, ns := range r.WatchNamespaces {
		watched[ns] = true
	}
	swept := map[types.NamespacedName]bool{}
	for {
		var list kqv1.KafkaClusterList
		if err := r.List(ctx, &list); err == nil {
			for i := range list.Items {
				kc := &list.Items[i]
				key := types.NamespacedName{Namespace: kc.Namespace, Name: kc.Name}
				if swept[key] || !watched[kc.Namespace] {
					continue
				}
				if err := r.sweepCluster(ctx, kc, watched); err != nil {
					ctrl.LoggerFrom(ctx).Info("sweeping the claims of deleted ShareQueues failed; retried in a minute", "kafkaCluster", key.String(), "claimsTopic", r.ClaimsTopic, "error", err.Error())
					continue
				}
				swept[key] = true
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// sweepCluster is sweepClaims on kc's Kafka cluster.
func (r *ShareQueueReconciler) sweepCluster(ctx context.Context, kc *kqv1.KafkaCluster, watched map[string]bool) error {
	timeout := r.KafkaTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	kctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := pooledClientFor(kctx, r.APIReader, r.Pool, kc)
	if err != nil {
		return err
	}
	view, err := cl.Claims(kctx, r.ClaimsTopic, r.claimChanged)
	if kafka.IsAuthorization(err) {
		return nil // no claims to release; each queue reports ClaimsUnavailable
	} else if err != nil {
		return err
	}
	var stale []kafka.Claim
	for _, c := range view.All() {
		if !watched[c.Namespace] {
			continue
		}
		var sq kqv1.ShareQueue
		if err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: c.Claimant.Name}, &sq); err == nil && string(sq.UID) == c.UID && sq.DeletionTimestamp.IsZero() {
			continue // cached and live: no apiserver request
		}
		live, err := r.claimLive(ctx, c)
		if err != nil {
			return err
		}
		if !live {
			stale = append(stale, c)
		}
	}
	return view.Release(kctx, stale...)
}
