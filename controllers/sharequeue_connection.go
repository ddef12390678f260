package controllers

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete

// Keys of a queue's connection ConfigMap (spec.connectionConfigMap): the names Kafka's own
// clients and most frameworks' docs use, upper-cased for envFrom.
const (
	connBootstrap      = "KAFKA_BOOTSTRAP_SERVERS"
	connTopic          = "KAFKA_TOPIC"
	connGroup          = "KAFKA_GROUP_ID"
	connProtocol       = "KAFKA_SECURITY_PROTOCOL"
	connSASLMechanism  = "KAFKA_SASL_MECHANISM"
	connSASLSecret     = "KAFKA_SASL_SECRET_NAME"
	connSASLUserKey    = "KAFKA_SASL_USERNAME_KEY"
	connSASLPassKey    = "KAFKA_SASL_PASSWORD_KEY"
	connCASecret       = "KAFKA_TLS_CA_SECRET_NAME"
	connCAKey          = "KAFKA_TLS_CA_SECRET_KEY"
	connClientCert     = "KAFKA_TLS_CLIENT_CERT_SECRET_NAME"
	connTLSServerName  = "KAFKA_TLS_SERVER_NAME"
	connQueue          = "KQO_SHARE_QUEUE"
	connRepublisherURL = "KQO_REPUBLISHER_URL"
)

// connectionData is what a queue's application needs to consume it, from the queue and its
// KafkaCluster: addresses, names and the security settings' shape, and the names (never the
// contents) of the Secrets holding credentials and certificates. Pure.
func connectionData(sq *kqv1.ShareQueue, kc *kqv1.KafkaCluster) map[string]string {
	d := map[string]string{
		connBootstrap: strings.Join(kc.Spec.BootstrapServers, ","),
		connTopic:     sq.KafkaTopicName(),
		connGroup:     sq.KafkaGroupID(),
		connQueue:     sq.Name,
	}
	tls, sasl := kc.Spec.TLS, kc.Spec.SASL
	switch {
	case tls != nil && sasl != nil:
		d[connProtocol] = "SASL_SSL"
	case tls != nil:
		d[connProtocol] = "SSL"
	case sasl != nil:
		d[connProtocol] = "SASL_PLAINTEXT"
	default:
		d[connProtocol] = "PLAINTEXT"
	}
	if sasl != nil {
		d[connSASLMechanism] = string(sasl.Mechanism)
		if sasl.SecretName != "" {
			d[connSASLSecret] = sasl.SecretName
			d[connSASLPassKey] = sasl.PasswordKeyOrDefault()
			if k := sasl.UsernameKeyOrDefault(); k != "" {
				d[connSASLUserKey] = k
			}
		}
	}
	if tls != nil {
		if tls.CASecretRef != nil {
			d[connCASecret], d[connCAKey] = tls.CASecretRef.Name, tls.CASecretRef.Key
		}
		if name, _, _ := tls.ClientCertRef(); name != "" {
			d[connClientCert] = name
		}
		if tls.ServerName != "" {
			d[connTLSServerName] = tls.ServerName
		}
	}
	if route := sq.Status.DeadLetter; route != nil && route.Mode == kqv1.DeadLetterModeRepublisher && route.Active {
		// Pods labelled for the sidecar reach its API here (the webhook's default port).
		d[connRepublisherURL] = "http://127.0.0.1:8787"
	}
	return d
}

// publishConnection writes spec.connectionConfigMap (Active mode only, once the queue has a
// verdict that is not a conflict): created with the queue as its controller (deleted with
// it), updated when its data differs. A ConfigMap of that name the queue does not control is
// never written: Ready is False, ConnectionNotPublished, naming it.
func (q *queueScope) publishConnection(ctx context.Context) error {
	sq := q.sq
	ref := sq.Spec.ConnectionConfigMap
	if q.mode == kqv1.ReconcileActive {
		if err := q.pruneConnections(ctx); err != nil {
			return err
		}
	}
	if ref == nil || q.mode != kqv1.ReconcileActive || q.ready == nil ||
		q.ready.Reason == kqv1.ReasonConflict || q.ready.Reason == kqv1.ReasonGroupTypeConflict {
		return nil
	}
	want := connectionData(sq, &q.kc)
	notPublished := func(msg string) error {
		q.setReady(condInput{metav1.ConditionFalse, kqv1.ReasonConnectionNotPublished, msg}, true)
		return nil
	}
	var cm corev1.ConfigMap
	// The cache holds only ConfigMaps labelled kafkaqueues.io/connection-of: one without the
	// label reads as absent here, and the create below then finds it.
	err := q.r.Get(ctx, types.NamespacedName{Namespace: sq.Namespace, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: sq.Namespace, Name: ref.Name,
			Labels: map[string]string{kqv1.ConnectionLabel: sq.Name}}, Data: want}
		if err := controllerutil.SetControllerReference(sq, &cm, q.r.Scheme()); err != nil {
			return err
		}
		if err := q.r.Create(ctx, &cm); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Outside the cache: unlabelled. If it is this queue's own (its label was
				// removed by hand), it is labelled and written again below.
				var cur corev1.ConfigMap // fresh: decoding into cm would keep the labels set above
				if gerr := q.r.APIReader.Get(ctx, client.ObjectKeyFromObject(&cm), &cur); gerr == nil && metav1.IsControlledBy(&cur, sq) {
					return q.writeConnection(ctx, &cur, want, notPublished)
				}
				return notPublished(fmt.Sprintf("ConfigMap %s/%s (spec.connectionConfigMap.name) exists and is not this ShareQueue's: it is never overwritten; choose another name, or delete it if it is a leftover", sq.Namespace, ref.Name))
			}
			return notPublished(fmt.Sprintf("creating ConfigMap %s/%s (spec.connectionConfigMap.name): %v", sq.Namespace, ref.Name, err))
		}
		return nil
	case err != nil:
		return err
	case !metav1.IsControlledBy(&cm, sq):
		return notPublished(fmt.Sprintf("ConfigMap %s/%s (spec.connectionConfigMap.name) is controlled by another object (label %s=%s): it is never overwritten; choose another name", sq.Namespace, ref.Name, kqv1.ConnectionLabel, cm.Labels[kqv1.ConnectionLabel]))
	case maps.Equal(cm.Data, want) && cm.Labels[kqv1.ConnectionLabel] == sq.Name:
		return nil
	}
	// The label too: the cache can still hold the object when its label was just removed.
	return q.writeConnection(ctx, &cm, want, notPublished)
}

// writeConnection patches the queue's own connection ConfigMap cm to carry its label and
// data want.
func (q *queueScope) writeConnection(ctx context.Context, cm *corev1.ConfigMap, want map[string]string, notPublished func(string) error) error {
	base := cm.DeepCopy()
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels[kqv1.ConnectionLabel], cm.Data = q.sq.Name, want
	if err := q.r.Patch(ctx, cm, client.MergeFrom(base)); err != nil {
		return notPublished(fmt.Sprintf("updating ConfigMap %s/%s (spec.connectionConfigMap.name): %v", cm.Namespace, cm.Name, err))
	}
	return nil
}

// pruneConnections deletes the connection ConfigMaps this queue controls that its spec no
// longer names (spec.connectionConfigMap renamed or removed): left, they would go stale with
// the next KafkaCluster change, and still hold the name against another queue.
func (q *queueScope) pruneConnections(ctx context.Context) error {
	sq := q.sq
	var cms corev1.ConfigMapList
	if err := q.r.List(ctx, &cms, client.InNamespace(sq.Namespace), client.MatchingLabels{kqv1.ConnectionLabel: sq.Name}); err != nil {
		return err
	}
	for i := range cms.Items {
		cm := &cms.Items[i]
		if ref := sq.Spec.ConnectionConfigMap; (ref != nil && cm.Name == ref.Name) || !metav1.IsControlledBy(cm, sq) || !cm.DeletionTimestamp.IsZero() {
			continue
		}
		if err := q.r.Delete(ctx, cm, client.Preconditions{UID: &cm.UID, ResourceVersion: &cm.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ConfigMap %s/%s, which spec.connectionConfigMap no longer names: %w", cm.Namespace, cm.Name, err)
		}
		q.r.event(sq, corev1.EventTypeNormal, "ConnectionConfigMapDeleted", "Delete",
			fmt.Sprintf("deleted ConfigMap %s/%s: spec.connectionConfigMap no longer names it", cm.Namespace, cm.Name))
	}
	return nil
}
