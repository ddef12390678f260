package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KafkaCluster condition types (see also ConditionReady).
const (
	// ConditionConnected is True when the operator reached the bootstrap servers and read the
	// cluster's metadata.
	ConditionConnected = "Connected"
	// ConditionShareGroupsEnabled is True when the finalized share.version is at least 1
	// (KIP-932).
	ConditionShareGroupsEnabled = "ShareGroupsEnabled"
	// ConditionShareStateReplicated tells whether the __share_group_state topic exists with the
	// replication the cluster can hold.
	ConditionShareStateReplicated = "ShareStateReplicated"
)

// FeaturePolicy says whether the operator may change the cluster's finalized features.
// +kubebuilder:validation:Enum=Observe;Finalize
type FeaturePolicy string

const (
	// FeaturePolicyObserve never changes cluster features; it only reports them.
	FeaturePolicyObserve FeaturePolicy = "Observe"
	// FeaturePolicyFinalize raises share.version to targetShareVersion with UpdateFeatures
	// (upgrade type "upgrade"); it never downgrades.
	FeaturePolicyFinalize FeaturePolicy = "Finalize"
)

// ShareStatePolicy says whether the operator may change the __share_group_state topic.
// +kubebuilder:validation:Enum=Observe;Manage
type ShareStatePolicy string

const (
	// ShareStatePolicyObserve only reports the topic's replication.
	ShareStatePolicyObserve ShareStatePolicy = "Observe"
	// ShareStatePolicyManage raises the topic's replication factor to min(3, brokers) and keeps
	// its min.insync.replicas at min(2, RF).
	ShareStatePolicyManage ShareStatePolicy = "Manage"
)

// SASLMechanism is a Kafka SASL mechanism name.
// +kubebuilder:validation:Enum=PLAIN;SCRAM-SHA-256;SCRAM-SHA-512;OAUTHBEARER;AWS_MSK_IAM
type SASLMechanism string

// SASL mechanisms the operator speaks.
const (
	SASLMechanismPlain       SASLMechanism = "PLAIN"
	SASLMechanismScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLMechanismScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	// SASLMechanismOAuthBearer is OAUTHBEARER (KIP-255, RFC 7628) with a bearer token.
	SASLMechanismOAuthBearer SASLMechanism = "OAUTHBEARER"
	// SASLMechanismAWSMSKIAM is Amazon MSK's IAM access control (SigV4-signed, service
	// kafka-cluster).
	SASLMechanismAWSMSKIAM SASLMechanism = "AWS_MSK_IAM"
)

// Default key names of the Secrets a KafkaCluster references.
const (
	DefaultUsernameKey        = "username"
	DefaultPasswordKey        = "password"
	DefaultCertKey            = "tls.crt"
	DefaultKeyKey             = "tls.key"
	DefaultAccessKeyIDKey     = "accessKeyId"
	DefaultSecretAccessKeyKey = "secretAccessKey"
	DefaultSessionTokenKey    = "sessionToken"
)

// ClientCertificate selects a client certificate and its private key, both PEM, in one Secret.
type ClientCertificate struct {
	// secretName names the Secret in the KafkaCluster's namespace, for example a
	// kubernetes.io/tls Secret, or a Strimzi KafkaUser's Secret (named after the KafkaUser).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// certKey is the key holding the PEM certificate (chain). Default "tls.crt"; a Strimzi
	// KafkaUser Secret has it as "user.crt". Kafka's ssl.keystore.certificate.chain.
	// +optional
	// +kubebuilder:default="tls.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CertKey string `json:"certKey,omitempty"`
	// keyKey is the key holding the unencrypted PEM private key. Default "tls.key"; a Strimzi
	// KafkaUser Secret has it as "user.key". Kafka's ssl.keystore.key.
	// +optional
	// +kubebuilder:default="tls.key"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	KeyKey string `json:"keyKey,omitempty"`
}

// KafkaClusterTLS configures TLS to the brokers.
// +kubebuilder:validation:XValidation:rule="!(has(self.clientCert) && has(self.clientCertSecretName))",message="set clientCert or the deprecated clientCertSecretName, not both"
type KafkaClusterTLS struct {
	// caSecretRef selects a PEM CA bundle used to verify the brokers (Kafka's
	// ssl.truststore.certificates), for example {name: <cluster>-cluster-ca-cert, key: ca.crt}
	// for a Strimzi cluster. Absent: the system roots.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`
	// clientCert selects the client certificate and key presented to the brokers for mutual
	// TLS (Kafka's ssl.keystore.*). For a Strimzi KafkaUser with authentication type tls:
	// {secretName: <user>, certKey: user.crt, keyKey: user.key}.
	// +optional
	ClientCert *ClientCertificate `json:"clientCert,omitempty"`
	// clientCertSecretName is deprecated: use clientCert. It names a Secret with the keys
	// tls.crt and tls.key, the same as clientCert with only secretName set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClientCertSecretName string `json:"clientCertSecretName,omitempty"`
	// serverName overrides the name checked against the brokers' certificates.
	// +optional
	ServerName string `json:"serverName,omitempty"`
}

// ClientCertRef is the Secret and keys of the client certificate: clientCert, or the
// deprecated clientCertSecretName with tls.crt and tls.key. An empty name: no client
// certificate.
func (t *KafkaClusterTLS) ClientCertRef() (secretName, certKey, keyKey string) {
	switch {
	case t == nil:
		return "", "", ""
	case t.ClientCert != nil:
		return t.ClientCert.SecretName, orDefault(t.ClientCert.CertKey, DefaultCertKey), orDefault(t.ClientCert.KeyKey, DefaultKeyKey)
	case t.ClientCertSecretName != "":
		return t.ClientCertSecretName, DefaultCertKey, DefaultKeyKey
	}
	return "", "", ""
}

// OAuthBearer says where OAUTHBEARER tokens come from: exactly one of tokenSecretRef and
// clientCredentials.
// +kubebuilder:validation:XValidation:rule="has(self.tokenSecretRef) != has(self.clientCredentials)",message="set exactly one of tokenSecretRef and clientCredentials"
type OAuthBearer struct {
	// tokenSecretRef selects a Secret key holding a bearer token (for example a JWT) sent as
	// is. The operator re-reads it at every probe (--cluster-probe-interval) and reconnects
	// when it changed; the sidecar mounts it as a file and reads it at every authentication,
	// so whatever rotates the Secret must do so before the token expires.
	// +optional
	TokenSecretRef *SecretKeyReference `json:"tokenSecretRef,omitempty"`
	// clientCredentials fetches tokens with the OAuth 2.0 client-credentials grant (RFC 6749
	// section 4.4), like Kafka's sasl.oauthbearer.token.endpoint.url with
	// OAuthBearerLoginCallbackHandler.
	// +optional
	ClientCredentials *OAuthClientCredentials `json:"clientCredentials,omitempty"`
}

// OAuthClientCredentials is an OAuth 2.0 client-credentials grant against a token endpoint.
// Tokens are cached and fetched again 30 seconds before they expire (expires_in of the token
// response).
type OAuthClientCredentials struct {
	// tokenEndpoint is the token endpoint's URL (Kafka's sasl.oauthbearer.token.endpoint.url),
	// https:// or, for a local endpoint, http://. Verified against the system roots.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^https?://[^\s]+$`
	TokenEndpoint string `json:"tokenEndpoint"`
	// clientId is the OAuth client id (Kafka's JAAS option clientId).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ClientID string `json:"clientId"`
	// clientSecretRef selects the Secret key holding the client secret (Kafka's JAAS option
	// clientSecret). It is sent with HTTP Basic authentication.
	// +required
	ClientSecretRef SecretKeyReference `json:"clientSecretRef"`
	// scope is the space-separated scope requested (Kafka's JAAS option scope). Absent: none.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Scope string `json:"scope,omitempty"`
}

// AWSMSKIAM says where AWS_MSK_IAM takes its AWS credentials. The region is the one in the
// brokers' host names (b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com), or else the
// AWS_REGION or AWS_DEFAULT_REGION environment variable of the process.
type AWSMSKIAM struct {
	// secretName names a Secret in the KafkaCluster's namespace holding an access key.
	// Absent: the environment of the process (the manager's, and the application Pod's for
	// the sidecar): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, read at
	// every authentication, else web identity (IRSA's AWS_ROLE_ARN and
	// AWS_WEB_IDENTITY_TOKEN_FILE, exchanged with STS AssumeRoleWithWebIdentity); see
	// docs/msk.md.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`
	// accessKeyIdKey is the key holding the access key id. Default "accessKeyId".
	// +optional
	// +kubebuilder:default="accessKeyId"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	AccessKeyIDKey string `json:"accessKeyIdKey,omitempty"`
	// secretAccessKeyKey is the key holding the secret access key. Default "secretAccessKey".
	// +optional
	// +kubebuilder:default="secretAccessKey"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretAccessKeyKey string `json:"secretAccessKeyKey,omitempty"`
	// sessionTokenKey is the key holding a session token of temporary credentials; when the
	// Secret has no such key, none is sent. Default "sessionToken".
	// +optional
	// +kubebuilder:default="sessionToken"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SessionTokenKey string `json:"sessionTokenKey,omitempty"`
}

// KafkaClusterSASL configures SASL authentication.
// +kubebuilder:validation:XValidation:rule="!(self.mechanism in ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']) || has(self.secretName)",message="secretName is required for PLAIN and SCRAM"
// +kubebuilder:validation:XValidation:rule="(self.mechanism in ['PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512']) || !(has(self.secretName) || has(self.username) || has(self.usernameKey) || has(self.passwordKey))",message="secretName, username, usernameKey and passwordKey apply to PLAIN and SCRAM only"
// +kubebuilder:validation:XValidation:rule="!(has(self.username) && has(self.usernameKey))",message="set username or usernameKey, not both"
// +kubebuilder:validation:XValidation:rule="(self.mechanism == 'OAUTHBEARER') == has(self.oauthBearer)",message="oauthBearer is required for OAUTHBEARER and applies to it only"
// +kubebuilder:validation:XValidation:rule="self.mechanism == 'AWS_MSK_IAM' || !has(self.awsMskIam)",message="awsMskIam applies to AWS_MSK_IAM only"
type KafkaClusterSASL struct {
	// mechanism is the SASL mechanism (Kafka's sasl.mechanism): PLAIN, SCRAM-SHA-256,
	// SCRAM-SHA-512 (credentials from secretName), OAUTHBEARER (oauthBearer) or AWS_MSK_IAM
	// (awsMskIam).
	// +required
	Mechanism SASLMechanism `json:"mechanism"`
	// secretName names a Secret in the same namespace holding the password (passwordKey) and,
	// unless username is set, the username (usernameKey). Required for PLAIN and SCRAM. For a
	// Strimzi KafkaUser with authentication type scram-sha-512: the KafkaUser's Secret (keys
	// password and sasl.jaas.config), with username set to the KafkaUser's name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`
	// username is the user name, literally. Set it or usernameKey, not both; with neither,
	// the username is read from the key "username".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Username string `json:"username,omitempty"`
	// usernameKey is the key of secretName holding the user name. Default "username" when
	// username is not set. Trailing line breaks of the value are dropped (a Secret made with
	// `echo name | base64` has one), for the manager and the republisher sidecar alike.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	UsernameKey string `json:"usernameKey,omitempty"`
	// passwordKey is the key of secretName holding the password. Default "password" (also the
	// key of a Strimzi KafkaUser's Secret). Trailing line breaks of the value are dropped;
	// other whitespace is kept as part of the password.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	PasswordKey string `json:"passwordKey,omitempty"`
	// oauthBearer configures OAUTHBEARER: a static token or the client-credentials grant.
	// Required with mechanism OAUTHBEARER.
	// +optional
	OAuthBearer *OAuthBearer `json:"oauthBearer,omitempty"`
	// awsMskIam configures AWS_MSK_IAM's credentials. Absent with mechanism AWS_MSK_IAM: the
	// environment of the process (see AWSMSKIAM.secretName).
	// +optional
	AWSMSKIAM *AWSMSKIAM `json:"awsMskIam,omitempty"`
}

// UsernameKeyOrDefault is the key of secretName holding the user name: usernameKey, or
// "username"; empty when username is given literally.
func (s *KafkaClusterSASL) UsernameKeyOrDefault() string {
	if s.Username != "" {
		return ""
	}
	return orDefault(s.UsernameKey, DefaultUsernameKey)
}

// PasswordKeyOrDefault is passwordKey, or "password".
func (s *KafkaClusterSASL) PasswordKeyOrDefault() string {
	return orDefault(s.PasswordKey, DefaultPasswordKey)
}

// Keys are the AWS Secret's key names with their defaults applied.
func (a *AWSMSKIAM) Keys() (accessKeyID, secretAccessKey, sessionToken string) {
	return orDefault(a.AccessKeyIDKey, DefaultAccessKeyIDKey), orDefault(a.SecretAccessKeyKey, DefaultSecretAccessKeyKey), orDefault(a.SessionTokenKey, DefaultSessionTokenKey)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// ShareStateTopicSpec says how the operator treats the __share_group_state topic.
type ShareStateTopicSpec struct {
	// policy is Observe (default: report only) or Manage (raise RF to min(3, brokers), keep
	// min.insync.replicas at min(2, RF)).
	// +optional
	// +kubebuilder:default=Observe
	Policy ShareStatePolicy `json:"policy,omitempty"`
}

// KafkaClusterSpec is one Kafka cluster the operator talks to.
// +kubebuilder:validation:XValidation:rule="self.featurePolicy != 'Finalize' || has(self.targetShareVersion)",message="targetShareVersion is required when featurePolicy is Finalize"
type KafkaClusterSpec struct {
	// bootstrapServers lists host:port pairs of brokers to bootstrap from.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:Pattern=`^[^\s:]+:[0-9]{1,5}$`
	// +listType=atomic
	BootstrapServers []string `json:"bootstrapServers"`
	// tls enables TLS to the brokers. Absent: plaintext.
	// +optional
	TLS *KafkaClusterTLS `json:"tls,omitempty"`
	// sasl enables SASL authentication. Absent: none.
	// +optional
	SASL *KafkaClusterSASL `json:"sasl,omitempty"`
	// featurePolicy is Observe (default: never change features) or Finalize (raise
	// share.version to targetShareVersion with UpdateFeatures, upgrade type "upgrade").
	// +optional
	// +kubebuilder:default=Observe
	FeaturePolicy FeaturePolicy `json:"featurePolicy,omitempty"`
	// targetShareVersion is the share.version level Finalize raises the cluster to: 1 enables
	// share groups (KIP-932), 2 adds broker-native dead-letter queues (KIP-1191).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2
	TargetShareVersion *int32 `json:"targetShareVersion,omitempty"`
	// shareStateTopic says how the __share_group_state topic is treated.
	// +optional
	// +kubebuilder:default={policy: Observe}
	ShareStateTopic ShareStateTopicSpec `json:"shareStateTopic,omitempty"`
}

// BrokerStatus describes one broker of the cluster.
type BrokerStatus struct {
	// id is the broker's node.id.
	ID int32 `json:"id"`
	// host is the advertised host.
	Host string `json:"host"`
	// port is the advertised port.
	Port int32 `json:"port"`
	// rack is the broker.rack, if set.
	// +optional
	Rack string `json:"rack,omitempty"`
}

// FeatureLevel is a finalized feature level as the brokers report it in ApiVersions
// FinalizedFeatures.
type FeatureLevel struct {
	// name is the feature name, for example "share.version".
	Name string `json:"name"`
	// level is the finalized max version level.
	Level int32 `json:"level"`
}

// FeatureRange is the range of levels a feature's brokers support (ApiVersions
// SupportedFeatures), intersected over all brokers.
type FeatureRange struct {
	// name is the feature name.
	Name string `json:"name"`
	// minLevel is the lowest level every broker supports.
	MinLevel int32 `json:"minLevel"`
	// maxLevel is the highest level every broker supports.
	MaxLevel int32 `json:"maxLevel"`
}

// Bound is a broker's default and its min/max bound for one share-group setting, as read with
// DescribeConfigs on a BROKER resource. A nil field means the broker does not report it (for
// example the KIP-1240 min/max configs on brokers before 4.3): it is absent, not invented.
type Bound struct {
	// min is the lowest value a group config may take (group.share.min.*).
	// +optional
	Min *int64 `json:"min,omitempty"`
	// default is the value groups get without an override (group.share.*).
	// +optional
	Default *int64 `json:"default,omitempty"`
	// max is the highest value a group config may take (group.share.max.*).
	// +optional
	Max *int64 `json:"max,omitempty"`
}

// ShareBounds are the broker-side defaults and bounds of share-group configs (KIP-932,
// KIP-1240). Durations are in milliseconds, as Kafka stores them.
type ShareBounds struct {
	// deliveryCountLimit: group.share.{min.,max.,}delivery.count.limit.
	// +optional
	DeliveryCountLimit Bound `json:"deliveryCountLimit,omitempty"`
	// recordLockDurationMs: group.share.{min.,max.,}record.lock.duration.ms.
	// +optional
	RecordLockDurationMs Bound `json:"recordLockDurationMs,omitempty"`
	// partitionMaxRecordLocks: group.share.{min.,max.,}partition.max.record.locks.
	// +optional
	PartitionMaxRecordLocks Bound `json:"partitionMaxRecordLocks,omitempty"`
	// sessionTimeoutMs: group.share.{min.,max.,}session.timeout.ms.
	// +optional
	SessionTimeoutMs Bound `json:"sessionTimeoutMs,omitempty"`
	// heartbeatIntervalMs: group.share.{min.,max.,}heartbeat.interval.ms.
	// +optional
	HeartbeatIntervalMs Bound `json:"heartbeatIntervalMs,omitempty"`
	// maxGroupSize: group.share.max.size (members per share group).
	// +optional
	MaxGroupSize *int64 `json:"maxGroupSize,omitempty"`
}

// PartitionAssignment is one partition's replicas.
type PartitionAssignment struct {
	// partition is the partition index.
	Partition int32 `json:"partition"`
	// replicas are the broker ids holding the partition, preferred leader first.
	// +listType=atomic
	Replicas []int32 `json:"replicas"`
	// isr are the in-sync replicas.
	// +optional
	// +listType=atomic
	ISR []int32 `json:"isr,omitempty"`
}

// ShareStateTopicStatus reports the __share_group_state topic and the brokers' static
// settings for it.
type ShareStateTopicStatus struct {
	// exists is true when the topic has been created.
	Exists bool `json:"exists"`
	// partitions is the topic's partition count.
	// +optional
	Partitions int32 `json:"partitions,omitempty"`
	// replicationFactor is the smallest replica count over the topic's partitions.
	// +optional
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`
	// minInSyncReplicas is the topic's min.insync.replicas.
	// +optional
	MinInSyncReplicas *int32 `json:"minInSyncReplicas,omitempty"`
	// underReplicatedPartitions counts partitions whose ISR is smaller than their replicas.
	// +optional
	UnderReplicatedPartitions int32 `json:"underReplicatedPartitions,omitempty"`
	// assignments lists each partition's replicas and ISR, sorted by partition.
	// +optional
	// +listType=atomic
	Assignments []PartitionAssignment `json:"assignments,omitempty"`
	// targetReplicationFactor is min(3, brokers), the replication the cluster can hold.
	// +optional
	TargetReplicationFactor int32 `json:"targetReplicationFactor,omitempty"`
	// missingBrokers lists broker ids that hold replicas but are not in the cluster.
	// +optional
	// +listType=atomic
	MissingBrokers []int32 `json:"missingBrokers,omitempty"`
	// configuredReplicationFactor is the brokers' share.coordinator.state.topic.replication.factor.
	// +optional
	ConfiguredReplicationFactor *int32 `json:"configuredReplicationFactor,omitempty"`
	// configuredMinISR is the brokers' share.coordinator.state.topic.min.isr.
	// +optional
	ConfiguredMinISR *int32 `json:"configuredMinISR,omitempty"`
}

// KafkaClusterStatus is what the operator last observed of the cluster.
type KafkaClusterStatus struct {
	// observedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, Connected, ShareGroupsEnabled, ShareStateReplicated.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// clusterID is the Kafka cluster id.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// controllerID is the node id the brokers report as controller (-1 when unknown).
	// +optional
	ControllerID *int32 `json:"controllerID,omitempty"`
	// brokerCount is the number of live brokers in the metadata.
	// +optional
	BrokerCount int32 `json:"brokerCount,omitempty"`
	// brokers lists the live brokers, sorted by id.
	// +optional
	// +listType=atomic
	Brokers []BrokerStatus `json:"brokers,omitempty"`
	// finalizedFeatures lists every finalized feature and its level, sorted by name.
	// +optional
	// +listType=atomic
	FinalizedFeatures []FeatureLevel `json:"finalizedFeatures,omitempty"`
	// supportedFeatures lists the level range every broker supports, sorted by name.
	// +optional
	// +listType=atomic
	SupportedFeatures []FeatureRange `json:"supportedFeatures,omitempty"`
	// shareVersion is the finalized share.version (0 when not finalized).
	// +optional
	ShareVersion int32 `json:"shareVersion"`
	// shareBounds are the brokers' share-group defaults and bounds.
	// +optional
	ShareBounds *ShareBounds `json:"shareBounds,omitempty"`
	// shareStateTopic reports __share_group_state.
	// +optional
	ShareStateTopic *ShareStateTopicStatus `json:"shareStateTopic,omitempty"`
	// brokerNativeDLQ is true when share.version >= 2 (KIP-1191).
	// +optional
	BrokerNativeDLQ bool `json:"brokerNativeDLQ"`
	// deadLetterTopicPrefix is the brokers' errors.deadletterqueue.topic.name.prefix, when reported.
	// +optional
	DeadLetterTopicPrefix *string `json:"deadLetterTopicPrefix,omitempty"`
}

// KafkaCluster is one Kafka cluster the operator talks to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=kqc,categories=kafkaqueues
// +kubebuilder:printcolumn:name="Brokers",type=integer,JSONPath=`.status.brokerCount`
// +kubebuilder:printcolumn:name="ShareVersion",type=integer,JSONPath=`.status.shareVersion`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Reconcile",type=string,JSONPath=`.metadata.annotations.kafkaqueues\.io/reconcile`,description="The kafkaqueues.io/reconcile annotation (Paused, ObserveOnly, Plan); empty is Active"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type KafkaCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired connection and policies.
	// +required
	Spec KafkaClusterSpec `json:"spec"`
	// status is what was last observed.
	// +optional
	Status KafkaClusterStatus `json:"status,omitempty"`
}

// KafkaClusterList is a list of KafkaCluster.
//
// +kubebuilder:object:root=true
type KafkaClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KafkaCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&KafkaCluster{}, &KafkaClusterList{})
}
