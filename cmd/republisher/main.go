// Command republisher is the dead-letter sidecar for clusters without broker-native DLQs
// (share.version below 2). It consumes a ShareQueue's share group for the application, serves
// records over a local HTTP API (api/republisher/openapi.yaml) and writes dead records to the
// route's topic before accepting them. Every flag also reads an environment variable, which is
// how the injecting webhook configures it; the SASL credentials are read from the environment
// only (KQO_SASL_USERNAME, KQO_SASL_PASSWORD, KQO_SASL_OAUTH_CLIENT_SECRET and the AWS_*
// variables: the webhook points them at the KafkaCluster's Secrets with secretKeyRef) or from
// mounted files (an OAUTHBEARER token), never from flags, and are never logged.
//
// Probes: /healthz (the process serves) and /readyz (200 once the application API accepts
// connections, 503 before, while the queue's group id names a group of another type or the
// group's share.delivery.count.limit is below 2, and once shutdown begins) are served on the
// metrics listener (--metrics-bind-address, :9787, all interfaces, so the kubelet reaches them
// while the API stays on loopback). With metrics disabled ("0") they are served only on
// --health-bind-address; that flag also moves them to a listener of their own when set to
// another address, and "0" turns them off.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkaqueues/kafka-queue-operator/internal/kafka"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
	"github.com/kafkaqueues/kafka-queue-operator/internal/version"
)

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// envErrs collects environment values that do not parse: silently ignoring one would change
// what the sidecar connects to (a KQO_TLS=yes taken as false would speak plaintext) or how it
// treats records (KQO_MAX_DELIVERY_ATTEMPTS=five taken as 5). The start stops with all of
// them, exit code 2. Only non-secret variables are read this way, so messages show values.
var envErrs []error

func envInt(name string, def int) int {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		why := "is not an integer"
		if errors.Is(err, strconv.ErrRange) {
			why = "is out of range"
		}
		envErrs = append(envErrs, fmt.Errorf("%s=%q %s", name, v, why))
		return def
	}
	return n
}

func envDuration(name string, def time.Duration) time.Duration {
	v, ok := os.LookupEnv(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		envErrs = append(envErrs, fmt.Errorf("%s=%q is not a duration with a unit, such as 30s or 1m", name, v))
		return def
	}
	return d
}

// maxRecordsLimit is the most --max-records takes: the DeadLetterRoute's
// spec.republisher.maxRecords maximum.
const maxRecordsLimit = 10000

// checkSettings refuses values that parse but cannot work, naming the flag and its variable.
func checkSettings(topic, dlq string, maxAttempts int, lease time.Duration, members, maxRecords int) []error {
	var errs []error
	if maxAttempts < 1 || maxAttempts > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("--max-delivery-attempts (KQO_MAX_DELIVERY_ATTEMPTS) is %d: it must be at least 1 (and at most %d)", maxAttempts, math.MaxInt32))
	}
	if lease <= 0 {
		errs = append(errs, fmt.Errorf("--lease (KQO_LEASE) is %s: it must be positive", lease))
	}
	if members < 1 {
		errs = append(errs, fmt.Errorf("--members (KQO_MEMBERS) is %d: it must be at least 1", members))
	}
	if maxRecords < 1 || maxRecords > maxRecordsLimit {
		errs = append(errs, fmt.Errorf("--max-records (KQO_MAX_RECORDS) is %d: it must be between 1 and %d", maxRecords, maxRecordsLimit))
	}
	if dlq != "" && dlq == topic {
		errs = append(errs, fmt.Errorf("--dead-letter-topic (KQO_DEAD_LETTER_TOPIC) is %q, the queue's own --topic (KQO_TOPIC): dead records would be delivered again; it must be another topic", dlq))
	}
	return errs
}

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			envErrs = append(envErrs, fmt.Errorf("%s=%q is not a boolean", name, v))
			return def
		}
		return b
	}
	return def
}

// security is how the sidecar authenticates to the brokers: file paths and names from flags,
// credentials from the environment.
type security struct {
	TLS                       bool
	CAFile, CertFile, KeyFile string
	ServerName                string
	SASLMechanism             string
	SASLUsername              string
	SASLPassword              string
	// OAUTHBEARER: a token file read at every authentication, or the client-credentials
	// grant (the client secret from the environment only).
	OAuthTokenFile     string
	OAuthTokenEndpoint string
	OAuthClientID      string
	OAuthClientSecret  string
	OAuthScope         string
}

func main() {
	var sec security
	var (
		bootstrap    = flag.String("bootstrap-servers", envOr("KQO_BOOTSTRAP_SERVERS", ""), "Kafka bootstrap servers, comma-separated (env KQO_BOOTSTRAP_SERVERS).")
		topic        = flag.String("topic", envOr("KQO_TOPIC", ""), "The queue's topic (env KQO_TOPIC).")
		group        = flag.String("group", envOr("KQO_GROUP", ""), "The queue's share group (env KQO_GROUP).")
		dlq          = flag.String("dead-letter-topic", envOr("KQO_DEAD_LETTER_TOPIC", ""), "Where dead records go; not the queue's own topic (env KQO_DEAD_LETTER_TOPIC).")
		maxAttempts  = flag.Int("max-delivery-attempts", envInt("KQO_MAX_DELIVERY_ATTEMPTS", 5), "The ShareQueue's spec.delivery.maxDeliveryAttempts when the Pod was made (env KQO_MAX_DELIVERY_ATTEMPTS): the application's attempts until the group's share.delivery.count.limit is read from the brokers, taken as one more until then. After that the brokers' limit L decides: the application gets L-1 attempts, the L-th is reserved for the dead-letter write.")
		limitRefresh = flag.Duration("limit-refresh", envDuration("KQO_LIMIT_REFRESH", 15*time.Second), "How often the group's share.delivery.count.limit is read from the brokers, so a maxDeliveryAttempts changed on a live queue is followed; a positive duration with a unit (env KQO_LIMIT_REFRESH).")
		lease        = flag.Duration("lease", envDuration("KQO_LEASE", 30*time.Second), "How long the application holds a received record before it lapses; a renew starts it again, and the brokers' lock is renewed meanwhile; a positive duration with a unit (env KQO_LEASE).")
		members      = flag.Int("members", envInt("KQO_MEMBERS", 4), "Share-group members, i.e. batches the application can hold at once; at least 1 (env KQO_MEMBERS).")
		maxRecords   = flag.Int("max-records", envInt("KQO_MAX_RECORDS", 100), "Most records one receive returns, 1 to 10000 (env KQO_MAX_RECORDS).")
		listen       = flag.String("listen", envOr("KQO_LISTEN", "127.0.0.1:8787"), "Address of the application API; loopback by default, as the app is in the same Pod (env KQO_LISTEN).")
		metricsAddr  = flag.String("metrics-bind-address", envOr("KQO_METRICS_BIND_ADDRESS", ":9787"), "Address of /metrics, and of the /healthz and /readyz probes unless --health-bind-address moves them; \"0\" disables it (env KQO_METRICS_BIND_ADDRESS).")
		healthAddr   = flag.String("health-bind-address", envOr("KQO_HEALTH_BIND_ADDRESS", ""), "Address of /healthz and /readyz (ready once the API accepts connections); empty: on the metrics listener, or nowhere when metrics are disabled; \"0\": off (env KQO_HEALTH_BIND_ADDRESS).")
	)
	flag.BoolVar(&sec.TLS, "tls", envBool("KQO_TLS", false), "Connect to the brokers with TLS; implied by any --tls-* flag (env KQO_TLS).")
	flag.StringVar(&sec.CAFile, "tls-ca-file", envOr("KQO_TLS_CA_FILE", ""), "PEM CA bundle the brokers' certificates must chain to; empty: the system roots (env KQO_TLS_CA_FILE).")
	flag.StringVar(&sec.CertFile, "tls-cert-file", envOr("KQO_TLS_CERT_FILE", ""), "PEM client certificate for mutual TLS, with --tls-key-file (env KQO_TLS_CERT_FILE).")
	flag.StringVar(&sec.KeyFile, "tls-key-file", envOr("KQO_TLS_KEY_FILE", ""), "PEM private key of --tls-cert-file (env KQO_TLS_KEY_FILE).")
	flag.StringVar(&sec.ServerName, "tls-server-name", envOr("KQO_TLS_SERVER_NAME", ""), "Name checked against the brokers' certificates instead of each address's host (env KQO_TLS_SERVER_NAME).")
	flag.StringVar(&sec.SASLMechanism, "sasl-mechanism", envOr("KQO_SASL_MECHANISM", ""), "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (credentials from the environment only: KQO_SASL_USERNAME, KQO_SASL_PASSWORD); OAUTHBEARER (--sasl-oauth-token-file, or --sasl-oauth-token-endpoint with --sasl-oauth-client-id and KQO_SASL_OAUTH_CLIENT_SECRET); AWS_MSK_IAM (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optionally AWS_SESSION_TOKEN from the environment, read at every authentication, or IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE) (env KQO_SASL_MECHANISM).")
	flag.StringVar(&sec.OAuthTokenFile, "sasl-oauth-token-file", envOr("KQO_SASL_OAUTH_TOKEN_FILE", ""), "OAUTHBEARER: file holding the bearer token, read at every authentication (env KQO_SASL_OAUTH_TOKEN_FILE).")
	flag.StringVar(&sec.OAuthTokenEndpoint, "sasl-oauth-token-endpoint", envOr("KQO_SASL_OAUTH_TOKEN_ENDPOINT", ""), "OAUTHBEARER: token endpoint URL of the client-credentials grant; the client secret comes from the environment only, KQO_SASL_OAUTH_CLIENT_SECRET (env KQO_SASL_OAUTH_TOKEN_ENDPOINT).")
	flag.StringVar(&sec.OAuthClientID, "sasl-oauth-client-id", envOr("KQO_SASL_OAUTH_CLIENT_ID", ""), "OAUTHBEARER: client id of the client-credentials grant (env KQO_SASL_OAUTH_CLIENT_ID).")
	flag.StringVar(&sec.OAuthScope, "sasl-oauth-scope", envOr("KQO_SASL_OAUTH_SCOPE", ""), "OAUTHBEARER: space-separated scope requested; empty: none (env KQO_SASL_OAUTH_SCOPE).")
	sec.SASLUsername, sec.SASLPassword = kafka.SecretCredential(os.Getenv("KQO_SASL_USERNAME")), kafka.SecretCredential(os.Getenv("KQO_SASL_PASSWORD"))
	sec.OAuthClientSecret = os.Getenv("KQO_SASL_OAUTH_CLIENT_SECRET")
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println("republisher", version.Get())
		return
	}
	settingErrs := checkSettings(*topic, *dlq, *maxAttempts, *lease, *members, *maxRecords)
	if *limitRefresh <= 0 {
		settingErrs = append(settingErrs, fmt.Errorf("--limit-refresh (KQO_LIMIT_REFRESH) is %s: it must be positive", *limitRefresh))
	}
	if err := errors.Join(append(envErrs, settingErrs...)...); err != nil {
		fmt.Fprintln(os.Stderr, "republisher:", err)
		os.Exit(2)
	}
	cfg, err := connection(*bootstrap, sec)
	if err == nil {
		err = run(cfg, republisher.Options{Topic: *topic, Group: *group, DeadLetterTopic: *dlq, MaxDeliveryAttempts: int32(*maxAttempts),
			LimitRefresh: *limitRefresh, Lease: *lease, Members: *members, MaxRecords: *maxRecords}, *listen, *metricsAddr, *healthAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "republisher:", err)
		os.Exit(1)
	}
}

// connection is the Kafka configuration: bootstrap servers, and TLS and SASL as
// internal/kafka builds them for the manager too. Files are read here, once; a file that does
// not hold what it should fails the start with its path (never its content).
func connection(bootstrap string, sec security) (kafka.Config, error) {
	if bootstrap == "" {
		return kafka.Config{}, errors.New("--bootstrap-servers (KQO_BOOTSTRAP_SERVERS) is required")
	}
	cfg := kafka.Config{BootstrapServers: strings.Split(bootstrap, ","), ClientID: "kafka-queue-republisher"}
	if sec.TLS || sec.CAFile != "" || sec.CertFile != "" || sec.KeyFile != "" || sec.ServerName != "" {
		ts := kafka.TLSSettings{ServerName: sec.ServerName}
		if (sec.CertFile == "") != (sec.KeyFile == "") {
			return kafka.Config{}, errors.New("--tls-cert-file (KQO_TLS_CERT_FILE) and --tls-key-file (KQO_TLS_KEY_FILE) go together")
		}
		read := func(flag, path string) ([]byte, error) {
			if path == "" {
				return nil, nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, fmt.Errorf("--%s: %w", flag, err)
			}
			return b, nil
		}
		var err error
		if ts.CAPEM, err = read("tls-ca-file", sec.CAFile); err != nil {
			return kafka.Config{}, err
		}
		if ts.CertPEM, err = read("tls-cert-file", sec.CertFile); err != nil {
			return kafka.Config{}, err
		}
		if ts.KeyPEM, err = read("tls-key-file", sec.KeyFile); err != nil {
			return kafka.Config{}, err
		}
		if _, err := ts.TLSConfig(); err != nil {
			switch {
			case errors.Is(err, kafka.ErrNoPEMCertificate):
				return kafka.Config{}, fmt.Errorf("--tls-ca-file %s holds no PEM certificate", sec.CAFile)
			case errors.Is(err, kafka.ErrKeyPair):
				return kafka.Config{}, fmt.Errorf("--tls-cert-file %s and --tls-key-file %s do not form a key pair", sec.CertFile, sec.KeyFile)
			}
			return kafka.Config{}, err
		}
		cfg.TLS = &ts
	}
	if sec.SASLMechanism == "" {
		if sec.SASLUsername != "" || sec.SASLPassword != "" || sec.OAuthTokenFile != "" || sec.OAuthTokenEndpoint != "" || sec.OAuthClientSecret != "" {
			return kafka.Config{}, errors.New("SASL credentials are set but --sasl-mechanism (KQO_SASL_MECHANISM) is not")
		}
		return cfg, nil
	}
	ss, err := saslSettings(sec)
	if err != nil {
		return kafka.Config{}, err
	}
	if err := ss.Validate(); err != nil {
		return kafka.Config{}, fmt.Errorf("--sasl-mechanism: %w", err)
	}
	cfg.SASL = &ss
	return cfg, nil
}

// saslSettings checks that the mechanism's inputs, and only those, are set, and builds its
// settings. Messages name flags and variables, never values.
func saslSettings(sec security) (kafka.SASLSettings, error) {
	ss := kafka.SASLSettings{Mechanism: sec.SASLMechanism}
	oauthSet := sec.OAuthTokenFile != "" || sec.OAuthTokenEndpoint != "" || sec.OAuthClientID != "" || sec.OAuthClientSecret != "" || sec.OAuthScope != ""
	switch sec.SASLMechanism {
	case kafka.SASLPlain, kafka.SASLScramSHA256, kafka.SASLScramSHA512:
		if oauthSet {
			return ss, fmt.Errorf("--sasl-oauth-* settings apply to %s only, not %s", kafka.SASLOAuthBearer, sec.SASLMechanism)
		}
		if sec.SASLUsername == "" || sec.SASLPassword == "" {
			return ss, fmt.Errorf("--sasl-mechanism %s needs KQO_SASL_USERNAME and KQO_SASL_PASSWORD in the environment", sec.SASLMechanism)
		}
		ss.Username, ss.Password = sec.SASLUsername, sec.SASLPassword
	case kafka.SASLOAuthBearer:
		if sec.SASLUsername != "" || sec.SASLPassword != "" {
			return ss, fmt.Errorf("KQO_SASL_USERNAME and KQO_SASL_PASSWORD do not apply to %s", sec.SASLMechanism)
		}
		switch {
		case sec.OAuthTokenFile != "" && sec.OAuthTokenEndpoint != "":
			return ss, errors.New("set --sasl-oauth-token-file (KQO_SASL_OAUTH_TOKEN_FILE) or --sasl-oauth-token-endpoint (KQO_SASL_OAUTH_TOKEN_ENDPOINT), not both")
		case sec.OAuthTokenFile != "":
			if sec.OAuthClientID != "" || sec.OAuthClientSecret != "" || sec.OAuthScope != "" {
				return ss, errors.New("--sasl-oauth-client-id, --sasl-oauth-scope and KQO_SASL_OAUTH_CLIENT_SECRET apply to --sasl-oauth-token-endpoint only")
			}
			// Read once now, so a missing or empty file fails the start with its path.
			if _, err := kafka.TokenFile(sec.OAuthTokenFile)(context.Background()); err != nil {
				return ss, fmt.Errorf("--sasl-oauth-token-file: %w", err)
			}
			ss.Token = kafka.TokenFile(sec.OAuthTokenFile)
		case sec.OAuthTokenEndpoint != "":
			if sec.OAuthClientID == "" || sec.OAuthClientSecret == "" {
				return ss, errors.New("--sasl-oauth-token-endpoint needs --sasl-oauth-client-id (KQO_SASL_OAUTH_CLIENT_ID) and KQO_SASL_OAUTH_CLIENT_SECRET in the environment")
			}
			ss.Token = kafka.ClientCredentialsToken(kafka.ClientCredentials{TokenEndpoint: sec.OAuthTokenEndpoint, ClientID: sec.OAuthClientID,
				ClientSecret: sec.OAuthClientSecret, Scope: sec.OAuthScope})
		default:
			return ss, fmt.Errorf("--sasl-mechanism %s needs --sasl-oauth-token-file (KQO_SASL_OAUTH_TOKEN_FILE) or --sasl-oauth-token-endpoint (KQO_SASL_OAUTH_TOKEN_ENDPOINT)", sec.SASLMechanism)
		}
	case kafka.SASLAWSMSKIAM:
		if sec.SASLUsername != "" || sec.SASLPassword != "" || oauthSet {
			return ss, fmt.Errorf("%s takes its credentials from the AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN, or IRSA's AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE); KQO_SASL_USERNAME, KQO_SASL_PASSWORD and --sasl-oauth-* do not apply", sec.SASLMechanism)
		}
		// Read at every authentication; checked once now so a missing key fails the start.
		if _, err := kafka.AWSCredentialsFromEnv()(context.Background()); err != nil {
			return ss, fmt.Errorf("--sasl-mechanism %s: %w", sec.SASLMechanism, err)
		}
		ss.AWS = kafka.AWSCredentialsFromEnv()
	}
	return ss, nil
}

// health answers the kubelet's probes. /healthz: 200 while the process serves. /readyz: 200
// once the application API accepts connections, 503 before that, while problem reports one
// (the queue's group id names a group of another type, the group's
// share.delivery.count.limit leaves no attempt to reserve, or no member reaches the brokers:
// republisher.Unready) and again once shutdown begins; the webhook points the sidecar's
// startupProbe at it, so a native sidecar holds the application's containers back until its
// API answers and its group is usable.
type health struct {
	ready   atomic.Bool
	problem func() string // nil: none
}

func (h *health) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !h.ready.Load() {
			http.Error(w, "the application API is not accepting connections", http.StatusServiceUnavailable)
			return
		}
		if h.problem != nil {
			if p := h.problem(); p != "" {
				http.Error(w, p, http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok"))
	})
}

// serveAPI binds the application API and starts serving it; h turns ready once the listener
// accepts connections. Serve's end is sent to errc.
func serveAPI(addr string, handler http.Handler, h *health, errc chan<- error) (*http.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("application API: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	h.ready.Store(true) // the kernel queues connections from here on; Serve takes them
	go func() { errc <- srv.Serve(l) }()
	return srv, nil
}

// serveAux binds a listener for /metrics and/or the probes.
func serveAux(addr string, mux *http.ServeMux, errc chan<- error) (*http.Server, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { errc <- srv.Serve(l) }()
	return srv, nil
}

func run(cfg kafka.Config, opts republisher.Options, listen, metricsAddr, healthAddr string) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts.Registerer = reg
	rp, err := republisher.New(cfg, opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go rp.Run(ctx)

	// The probes and metrics listen first, so /readyz answers 503 until the API is up.
	h := &health{problem: rp.Unready}
	errc := make(chan error, 3)
	var aux []*http.Server
	healthOnMetrics := healthAddr == "" || healthAddr == metricsAddr
	if metricsAddr != "0" {
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		if healthOnMetrics {
			h.register(mux)
		}
		srv, err := serveAux(metricsAddr, mux, errc)
		if err != nil {
			rp.Shutdown(context.Background())
			return fmt.Errorf("metrics: %w", err)
		}
		aux = append(aux, srv)
	}
	if healthAddr != "" && healthAddr != "0" && !healthOnMetrics {
		mux := http.NewServeMux()
		h.register(mux)
		srv, err := serveAux(healthAddr, mux, errc)
		if err != nil {
			rp.Shutdown(context.Background())
			return fmt.Errorf("health probes: %w", err)
		}
		aux = append(aux, srv)
	}
	api, err := serveAPI(listen, rp.Handler(), h, errc)
	if err != nil {
		rp.Shutdown(context.Background())
		return err
	}
	fmt.Fprintf(os.Stderr, "republisher: serving %s for group %s on %s, dead letters to %s (%s)\n", opts.Topic, opts.Group, listen, opts.DeadLetterTopic, describe(cfg))
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	h.ready.Store(false)
	// End the long-polls and stop handing out records, stop taking requests (acks in flight
	// finish), then give every held record back and close. Each step has its own bound, so a
	// slow one does not leave the last without time to flush the acks; together they fit a
	// Pod's default 30s grace period.
	within(3*time.Second, rp.Drain)
	within(5*time.Second, func(ctx context.Context) { _ = api.Shutdown(ctx) })
	for _, srv := range aux {
		within(time.Second, func(ctx context.Context) { _ = srv.Shutdown(ctx) })
	}
	within(20*time.Second, rp.Shutdown)
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// describe names the connection's security for the start line, including what the brokers'
// certificates are verified against (without --tls-ca-file, the system roots); never a
// credential.
func describe(cfg kafka.Config) string {
	parts := []string{"plaintext"}
	if cfg.TLS != nil {
		parts[0] = "TLS"
		if len(cfg.TLS.CertPEM) > 0 {
			parts[0] = "mutual TLS"
		}
		if len(cfg.TLS.CAPEM) == 0 {
			parts[0] += " verified against the system roots"
		} else {
			parts[0] += " verified against the --tls-ca-file bundle"
		}
	}
	if cfg.SASL != nil {
		parts = append(parts, "SASL "+cfg.SASL.Mechanism)
	}
	return strings.Join(parts, ", ")
}

// within runs f with a context that ends after d.
func within(d time.Duration, f func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	f(ctx)
}
