// Package kafka is the only package of the operator that speaks the Kafka protocol. It wraps
// one long-lived franz-go client per KafkaCluster and exposes the few admin calls the
// controllers need, with per-item results: a failed request is an error, a failed item is a
// field on its result.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Config is how to reach one cluster.
type Config struct {
	// BootstrapServers are host:port seeds.
	BootstrapServers []string
	// TLS, when non-nil, enables TLS with these settings (see TLSSettings.TLSConfig).
	TLS *TLSSettings
	// SASL, when non-nil, authenticates with these credentials (see SASLSettings.Validate).
	SASL *SASLSettings
	// ClientID is sent to the brokers; default "kafka-queue-operator".
	ClientID string
	// RequestTimeout bounds each admin call's retries (kgo.RetryTimeout) and is the timeout
	// the brokers get in CreateTopics and DeleteTopics (TimeoutMillis); default 15s.
	RequestTimeout time.Duration
	// BrokerWrites are called for every request written to a broker — one batched request may
	// serve many calls, and the client's own Metadata and coordinator requests count too —
	// with the Kafka API name (e.g. "CreateTopics") and the write's error (nil when written).
	// Metrics and request counting in tests use them.
	BrokerWrites []BrokerWriteFunc
	// BrokerConnects are called for every connection attempt to a broker, with the dial's
	// error (nil when connected).
	BrokerConnects []BrokerConnectFunc
	// Observe, when set, is called after every admin call with the Kafka API name, its
	// latency and its outcome: nil, the request error, or the first per-item error.
	Observe func(api string, latency time.Duration, err error)
	// Batching coalesces concurrent admin calls into shared requests; off by default.
	Batching Batching
}

// Client is a long-lived admin connection to one Kafka cluster. It is safe for concurrent use.
type Client struct {
	cl      *kgo.Client
	adm     *kadm.Client
	observe func(api string, latency time.Duration, err error)
	batch   *batchers // nil when Config.Batching is off
	// timeout is Config.RequestTimeout (default applied).
	timeout time.Duration
	auth    *authFailures
	// cfg is what the client was built from (the claims view builds its reader from it).
	cfg Config

	claimsMu sync.Mutex
	claims   map[string]*Claims // by claims topic, started by Claims
	// claimsDenied remembers, by claims topic, an authorization failure of Claims.
	claimsDenied map[string]deniedAt

	// dates holds the record batches Depth has dated (depthTimestamps).
	dates batchDates
}

// baseOpts are the connection options every client of cfg uses: seeds, client id, timeouts,
// TLS, SASL and hooks.
func baseOpts(cfg Config) ([]kgo.Opt, *authFailures, error) {
	if len(cfg.BootstrapServers) == 0 {
		return nil, nil, errors.New("kafka: no bootstrap servers")
	}
	id := cfg.ClientID
	if id == "" {
		id = "kafka-queue-operator"
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.BootstrapServers...),
		kgo.ClientID(id),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.MetadataMinAge(time.Second),
	}
	if cfg.TLS != nil {
		tc, err := cfg.TLS.TLSConfig()
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: TLS: %w", err)
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	af := &authFailures{}
	if cfg.SASL != nil {
		m, err := cfg.SASL.mechanism(af)
		if err != nil {
			return nil, nil, fmt.Errorf("kafka: %w", err)
		}
		opts = append(opts, kgo.SASL(m))
	}
	if len(cfg.BrokerWrites) > 0 {
		opts = append(opts, kgo.WithHooks(brokerWriteHook(append([]BrokerWriteFunc(nil), cfg.BrokerWrites...))))
	}
	if len(cfg.BrokerConnects) > 0 {
		opts = append(opts, kgo.WithHooks(brokerConnectHook(append([]BrokerConnectFunc(nil), cfg.BrokerConnects...))))
	}
	return opts, af, nil
}

// NewClient builds a client. It does not contact the brokers; the first call does.
func NewClient(cfg Config) (*Client, error) {
	opts, af, err := baseOpts(cfg)
	if err != nil {
		return nil, err
	}
	rt := cfg.RequestTimeout
	if rt == 0 {
		rt = 15 * time.Second
	}
	opts = append(opts, kgo.RetryTimeout(rt))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("kafka: building client: %w", err)
	}
	c := &Client{cl: cl, adm: kadm.NewClient(cl), observe: cfg.Observe, timeout: rt, auth: af, cfg: cfg}
	if cfg.Batching.Enabled {
		c.batch = newBatchers(c, cfg.Batching, rt+15*time.Second)
	}
	return c, nil
}

// AuthError is the last failure to obtain SASL credentials for a connection (OAUTHBEARER
// token, AWS_MSK_IAM credentials) when no later attempt succeeded; nil otherwise. A request
// that timed out while connecting reports only the deadline; this says why.
func (c *Client) AuthError() error { return c.auth.last() }

// CheckCredentials authenticates again: it opens a new connection to a seed broker with the
// client's settings (TLS, SASL) and sends a Metadata request on it. The client's own
// connections stay authenticated after the credentials stop working (a password changed at
// the brokers; Kafka re-authenticates a connection only with connections.max.reauth.ms), so
// only a new connection shows it. Nil without SASL, and for the token mechanisms
// (OAUTHBEARER, AWS_MSK_IAM), whose tokens expire and are fetched again by the client itself:
// only a password can be changed at the brokers under a live connection.
func (c *Client) CheckCredentials(ctx context.Context) (err_ error) {
	if s := c.cfg.SASL; s == nil || (s.Mechanism != SASLPlain && s.Mechanism != SASLScramSHA256 && s.Mechanism != SASLScramSHA512) {
		return nil
	}
	start := time.Now()
	defer func() { c.record("SaslAuthenticate", start, err_) }()
	opts, af, err := baseOpts(Config{BootstrapServers: c.cfg.BootstrapServers, ClientID: c.cfg.ClientID, TLS: c.cfg.TLS, SASL: c.cfg.SASL})
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts, kgo.RetryTimeout(c.timeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{}
	if _, err := req.RequestWith(ctx, cl); err != nil {
		if ae := af.last(); ae != nil && !strings.Contains(err.Error(), ae.Error()) {
			err = fmt.Errorf("%w (last authentication attempt: %v)", err, ae)
		}
		return wrap("authenticating a new connection", "", err)
	}
	return nil
}

// Close releases the client's connections, its claims views' included.
func (c *Client) Close() {
	c.closeClaims()
	c.cl.Close()
}

// Ping checks that some broker answers a metadata request.
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.adm.BrokerMetadata(ctx)
	return wrap("Metadata", "", err)
}

// record reports one admin call to Config.Observe.
func (c *Client) record(api string, start time.Time, err error) {
	if c.observe != nil {
		c.observe(api, time.Since(start), err)
	}
}

// firstItemErr returns the first non-nil error of a per-item result map, for metrics.
func firstItemErr[K comparable](m map[K]error) error {
	for _, e := range m {
		if e != nil {
			return e
		}
	}
	return nil
}

// Outcome names an error for metrics: "ok", the Kafka error code (INVALID_CONFIG, ...),
// "timeout" or "transport".
func Outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	return "transport"
}
