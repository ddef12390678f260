package rig

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultKafkaVersion is the Kafka release the rig runs unless told otherwise.
const DefaultKafkaVersion = "4.4.0"

// KafkaOptions configures a local KRaft cluster.
type KafkaOptions struct {
	// Version is the Kafka release whose jars run the brokers (default DefaultKafkaVersion).
	Version string
	// Brokers is the number of combined broker+controller nodes (default 1).
	Brokers int
	// ReleaseVersion formats storage at an older metadata version (e.g. "4.1", where
	// share.version starts at 0). Empty: the release's default.
	ReleaseVersion string
	// Features are extra "name=level" --feature arguments to the format command.
	Features []string
	// BrokerProps are extra server.properties entries for every node. They override the rig's
	// defaults, e.g. share.coordinator.state.topic.replication.factor.
	BrokerProps map[string]string
	// Dir is where data and logs go (default: a new temp dir, removed by Stop).
	Dir string
	// SASLUsers, when set, adds a SASL_PLAINTEXT listener on each node accepting these
	// users (name → password) with SCRAM-SHA-256, SCRAM-SHA-512 (credentials stored at format
	// time) and PLAIN. Node.SASLPort is its port.
	SASLUsers map[string]string
	// TLS, when set, adds an SSL listener serving this PEM certificate chain and PKCS#8 key.
	// Node.TLSPort is its port.
	TLS *TLSMaterial
	// OAuthBearer, when set, adds a SASL_PLAINTEXT listener (named OAUTH) with only
	// OAUTHBEARER enabled, validated by Kafka's built-in unsecured validator
	// (OAuthBearerUnsecuredValidatorCallbackHandler, the default without a JWKS endpoint): it
	// accepts an unsigned JWT (alg "none") whose sub claim is the principal; see
	// UnsecuredJWT. Node.OAuthPort is its port.
	OAuthBearer bool
	// Log receives progress lines (default: discarded).
	Log func(format string, args ...any)
	// StartTimeout bounds one attempt at bringing every broker into the metadata (default
	// 2m); see StartKafka.
	StartTimeout time.Duration
	// Host is the address every listener binds and advertises (default 127.0.0.1). The node
	// rig sets its network namespace's address, which Pods and the test process both reach.
	Host string
	// CommandPrefix runs each broker under another command, e.g. nsenter into a network
	// namespace (NodeRig); storage is formatted without it.
	CommandPrefix []string
	// JVMArgs are added to each broker's java command line (system properties).
	JVMArgs []string
}

// Node is one running KRaft node.
type Node struct {
	ID             int32
	Port           int
	ControllerPort int
	// SASLPort is the SASL_PLAINTEXT listener's port (0 without KafkaOptions.SASLUsers).
	SASLPort int
	// TLSPort is the SSL listener's port (0 without KafkaOptions.TLS).
	TLSPort int
	// OAuthPort is the OAUTHBEARER listener's port (0 without KafkaOptions.OAuthBearer).
	OAuthPort int
	Dir       string
	LogFile   string
	propsFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Kafka is a running local KRaft cluster.
type Kafka struct {
	Options   KafkaOptions
	ClusterID string
	Nodes     []*Node
	classpath string
	ownDir    bool
}

// errBrokersMissing marks a start whose nodes all kept running but did not all register
// in time; StartKafka tries again with a fresh cluster.
type errBrokersMissing struct{ err error }

func (e errBrokersMissing) Error() string { return e.err.Error() }

// startAttempts bounds how often StartKafka starts a fresh cluster after nodes that kept
// running did not all register. On a loaded 2-core machine a 3-node KRaft start has been
// seen to leave two brokers fenced for minutes while a fresh start came up in seconds.
const startAttempts = 3

// StartKafka formats storage for each node and starts the brokers, returning once every
// broker is in the metadata. If the nodes keep running but not every broker registers within
// a few minutes, it logs each node's warnings, stops them and starts a fresh cluster (new
// ports, new storage), up to startAttempts times; a node that exits fails at once.
func StartKafka(ctx context.Context, opts KafkaOptions) (*Kafka, error) {
	isolateTemp()
	if opts.Version == "" {
		opts.Version = DefaultKafkaVersion
	}
	if opts.Brokers <= 0 {
		opts.Brokers = 1
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 2 * time.Minute
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	cp, err := KafkaClasspath(opts.Version)
	if err != nil {
		return nil, err
	}
	baseDir := opts.Dir
	for attempt := 1; ; attempt++ {
		o := opts
		if baseDir != "" && attempt > 1 {
			o.Dir = filepath.Join(baseDir, fmt.Sprintf("attempt-%d", attempt))
			if err := os.MkdirAll(o.Dir, 0o755); err != nil {
				return nil, err
			}
		}
		release := acquireStartSlot("kafka " + opts.Version)
		k, err := startKafkaOnce(ctx, o, cp)
		release()
		var missing errBrokersMissing
		// A node that exits because another process took one of its ports between FreePorts
		// and the bind (two test runs on one host) gets a fresh cluster on new ports too.
		portTaken := err != nil && strings.Contains(err.Error(), "Address already in use")
		if err == nil || !(errors.As(err, &missing) || portTaken) || attempt == startAttempts || ctx.Err() != nil {
			return k, err
		}
		opts.Log("kafka %s: starting a fresh cluster after attempt %d of %d: %v", opts.Version, attempt, startAttempts, err)
	}
}

func startKafkaOnce(ctx context.Context, opts KafkaOptions, cp string) (*Kafka, error) {
	k := &Kafka{Options: opts, classpath: cp}
	if opts.Dir == "" {
		d, err := os.MkdirTemp("", "kqo-kafka-")
		if err != nil {
			return nil, err
		}
		k.Options.Dir, k.ownDir = d, true
	}
	ok := false
	defer func() {
		if !ok {
			k.Stop() // stops what started and removes a dir the rig made
		}
	}()
	// A random cluster id (Kafka's Uuid form). One starting with '-' would be read by the
	// storage tool as an option, so draw again.
	for k.ClusterID == "" || k.ClusterID[0] == '-' || k.ClusterID[0] == '_' {
		var id [16]byte
		_, _ = rand.Read(id[:])
		k.ClusterID = base64.RawURLEncoding.EncodeToString(id[:])
	}

	const portsPerNode = 5
	ports, err := FreePorts(portsPerNode * opts.Brokers)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := 0; i < opts.Brokers; i++ {
		p := ports[portsPerNode*i:]
		n := &Node{ID: int32(i + 1), Port: p[0], ControllerPort: p[1]}
		if len(opts.SASLUsers) > 0 {
			n.SASLPort = p[2]
		}
		if opts.TLS != nil {
			n.TLSPort = p[3]
		}
		if opts.OAuthBearer {
			n.OAuthPort = p[4]
		}
		n.Dir = filepath.Join(k.Options.Dir, fmt.Sprintf("node-%d", n.ID))
		n.LogFile = filepath.Join(n.Dir, "server.log")
		k.Nodes = append(k.Nodes, n)
		voters = append(voters, fmt.Sprintf("%d@%s:%d", n.ID, opts.Host, n.ControllerPort))
	}
	log4j := filepath.Join(k.Options.Dir, "log4j2.properties")
	if err := os.WriteFile(log4j, []byte(log4jConfig), 0o644); err != nil {
		return nil, err
	}
	rf := strconv.Itoa(min(3, opts.Brokers))
	isr := strconv.Itoa(min(2, opts.Brokers))
	for _, n := range k.Nodes {
		props := map[string]string{
			"process.roles":                                    "broker,controller",
			"node.id":                                          strconv.Itoa(int(n.ID)),
			"listeners":                                        fmt.Sprintf("PLAINTEXT://%[1]s:%[2]d,CONTROLLER://%[1]s:%[3]d", opts.Host, n.Port, n.ControllerPort),
			"advertised.listeners":                             fmt.Sprintf("PLAINTEXT://%s:%d", opts.Host, n.Port),
			"controller.listener.names":                        "CONTROLLER",
			"listener.security.protocol.map":                   "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
			"inter.broker.listener.name":                       "PLAINTEXT",
			"controller.quorum.voters":                         strings.Join(voters, ","),
			"log.dirs":                                         filepath.Join(n.Dir, "data"),
			"offsets.topic.replication.factor":                 rf,
			"offsets.topic.num.partitions":                     "5",
			"transaction.state.log.replication.factor":         rf,
			"transaction.state.log.min.isr":                    isr,
			"share.coordinator.state.topic.replication.factor": rf,
			"share.coordinator.state.topic.min.isr":            isr,
			"share.coordinator.state.topic.num.partitions":     "5",
			"default.replication.factor":                       "1",
			"num.partitions":                                   "1",
			"group.initial.rebalance.delay.ms":                 "0",
			"auto.create.topics.enable":                        "false",
			"num.network.threads":                              "2",
			"num.io.threads":                                   "4",
			"log.flush.interval.messages":                      "1000000",
		}
		if n.SASLPort != 0 {
			props["listeners"] += fmt.Sprintf(",SASL://%s:%d", opts.Host, n.SASLPort)
			props["advertised.listeners"] += fmt.Sprintf(",SASL://%s:%d", opts.Host, n.SASLPort)
			props["listener.security.protocol.map"] += ",SASL:SASL_PLAINTEXT"
			props["sasl.enabled.mechanisms"] = "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN"
			props["listener.name.sasl.scram-sha-256.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
			props["listener.name.sasl.scram-sha-512.sasl.jaas.config"] = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
			plain := "org.apache.kafka.common.security.plain.PlainLoginModule required"
			for u, pw := range opts.SASLUsers {
				plain += fmt.Sprintf(" user_%s=\"%s\"", u, pw)
			}
			props["listener.name.sasl.plain.sasl.jaas.config"] = plain + ";"
		}
		if n.TLSPort != 0 {
			props["listeners"] += fmt.Sprintf(",SSL://%s:%d", opts.Host, n.TLSPort)
			props["advertised.listeners"] += fmt.Sprintf(",SSL://%s:%d", opts.Host, n.TLSPort)
			props["listener.security.protocol.map"] += ",SSL:SSL"
			props["listener.name.ssl.ssl.keystore.type"] = "PEM"
			props["listener.name.ssl.ssl.keystore.certificate.chain"] = propEscape(opts.TLS.CertPEM)
			props["listener.name.ssl.ssl.keystore.key"] = propEscape(opts.TLS.KeyPEM)
			if opts.TLS.ClientCAPEM != "" {
				props["listener.name.ssl.ssl.client.auth"] = "required"
				props["listener.name.ssl.ssl.truststore.type"] = "PEM"
				props["listener.name.ssl.ssl.truststore.certificates"] = propEscape(opts.TLS.ClientCAPEM)
			}
		}
		if n.OAuthPort != 0 {
			props["listeners"] += fmt.Sprintf(",OAUTH://%s:%d", opts.Host, n.OAuthPort)
			props["advertised.listeners"] += fmt.Sprintf(",OAUTH://%s:%d", opts.Host, n.OAuthPort)
			props["listener.security.protocol.map"] += ",OAUTH:SASL_PLAINTEXT"
			props["listener.name.oauth.sasl.enabled.mechanisms"] = "OAUTHBEARER"
			// The login module's unsecured claim is the broker's own (unused) login; clients'
			// tokens go to the default server callback, the unsecured validator.
			props["listener.name.oauth.oauthbearer.sasl.jaas.config"] = `org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";`
		}
		maps.Copy(props, opts.BrokerProps)
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return nil, err
		}
		n.propsFile = filepath.Join(n.Dir, "server.properties")
		if err := writeProps(n.propsFile, props); err != nil {
			return nil, err
		}
		args := []string{"kafka.tools.StorageTool", "format", "-t", k.ClusterID, "-c", n.propsFile}
		if opts.ReleaseVersion != "" {
			args = append(args, "--release-version", opts.ReleaseVersion)
		}
		for _, f := range opts.Features {
			args = append(args, "--feature", f)
		}
		for u, pw := range opts.SASLUsers {
			for _, mech := range []string{"SCRAM-SHA-256", "SCRAM-SHA-512"} {
				args = append(args, "--add-scram", fmt.Sprintf("%s=[name=%s,password=%s]", mech, u, pw))
			}
		}
		cmd := exec.CommandContext(ctx, "java", append([]string{"-cp", cp, "-Dlog4j2.configurationFile=" + log4j}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("formatting node %d: %w\n%s", n.ID, err, tail(string(out), 2000))
		}
	}
	for _, n := range k.Nodes {
		if err := k.startNode(n); err != nil {
			return nil, err
		}
	}
	if err := k.WaitBrokers(ctx, opts.Brokers, opts.StartTimeout); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, errBrokersMissing{fmt.Errorf("%w\n%s", err, k.warnings(20))}
		}
		return nil, err
	}
	ok = true
	opts.Log("kafka %s: %d broker(s) up at %s (cluster %s, dir %s)", opts.Version, opts.Brokers, k.Bootstrap(), k.ClusterID, k.Options.Dir)
	return k, nil
}

// TLSMaterial is a PEM server certificate chain and its unencrypted PKCS#8 private key.
type TLSMaterial struct {
	CertPEM, KeyPEM string
	// ClientCAPEM, when set, makes the listener require client certificates signed by it.
	ClientCAPEM string
}

// propEscape writes a multi-line value as one .properties line (java.util.Properties reads
// \n back as a newline).
func propEscape(v string) string { return strings.ReplaceAll(strings.TrimSpace(v), "\n", `\n`) }

// TLSBootstrapServers returns host:port of every node's SSL listener.
func (k *Kafka) TLSBootstrapServers() []string {
	var s []string
	for _, n := range k.Nodes {
		if n.TLSPort != 0 {
			s = append(s, fmt.Sprintf("%s:%d", k.Options.Host, n.TLSPort))
		}
	}
	return s
}

// SASLBootstrapServers returns host:port of every node's SASL_PLAINTEXT listener.
func (k *Kafka) SASLBootstrapServers() []string {
	var s []string
	for _, n := range k.Nodes {
		if n.SASLPort != 0 {
			s = append(s, fmt.Sprintf("%s:%d", k.Options.Host, n.SASLPort))
		}
	}
	return s
}

// OAuthBootstrapServers returns host:port of every node's OAUTHBEARER listener.
func (k *Kafka) OAuthBootstrapServers() []string {
	var s []string
	for _, n := range k.Nodes {
		if n.OAuthPort != 0 {
			s = append(s, fmt.Sprintf("%s:%d", k.Options.Host, n.OAuthPort))
		}
	}
	return s
}

// UnsecuredJWT is a token the OAUTHBEARER listener's unsecured validator accepts: an
// unsigned JWT (header {"alg":"none"}, empty signature) with the claims sub, iat and exp
// (now + lifetime).
func UnsecuredJWT(sub string, lifetime time.Duration) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	now := time.Now()
	return enc(map[string]string{"alg": "none"}) + "." + enc(map[string]any{"sub": sub, "iat": now.Unix(), "exp": now.Add(lifetime).Unix()}) + "."
}

// Bootstrap returns the comma-separated bootstrap list.
func (k *Kafka) Bootstrap() string { return strings.Join(k.BootstrapServers(), ",") }

// BootstrapServers returns host:port of every node.
func (k *Kafka) BootstrapServers() []string {
	var s []string
	for _, n := range k.Nodes {
		s = append(s, fmt.Sprintf("%s:%d", k.Options.Host, n.Port))
	}
	return s
}

func (k *Kafka) startNode(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"java",
		"-Xms128m", "-Xmx768m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(k.Options.Dir, "log4j2.properties"),
		// Java ignores TMPDIR: without this a killed broker leaves its unpacked native
		// libraries (snappy, zstd) in /tmp, outside the rig's sweep of its own directory.
		"-Djava.io.tmpdir=" + k.Options.Dir}
	args = append(args, k.Options.JVMArgs...)
	args = append(args, "-cp", k.classpath, "kafka.Kafka", n.propsFile)
	args = append(slices.Clone(k.Options.CommandPrefix), args...)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the parent (Linux): a killed test run leaves no broker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting node %d: %w", n.ID, err)
	}
	n.cmd = cmd
	n.done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(n.done)
	}()
	return nil
}

// take marks the node stopped and returns its process (nil when it was not running) and the
// channel closed when that process has exited.
func (n *Node) take() (*exec.Cmd, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	return cmd, done
}

// StopNode stops one node gracefully (SIGTERM, then SIGKILL after 30s).
func (k *Kafka) StopNode(n *Node) {
	cmd, done := n.take()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// KillNode kills one node's process group with SIGKILL, with no grace (a crash: no
// controlled shutdown, no leadership handed over, unflushed log segments recovered at the
// next start), and waits for it to exit. StartNode brings it back.
func (k *Kafka) KillNode(n *Node) {
	cmd, done := n.take()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
}

// StartNode starts a stopped or killed node again, first merging props into its
// server.properties when given, and waits until all brokers are back in the metadata
// (RestartNode is StopNode then StartNode).
func (k *Kafka) StartNode(ctx context.Context, n *Node, props map[string]string) error {
	if len(props) > 0 {
		cur, err := readProps(n.propsFile)
		if err != nil {
			return err
		}
		maps.Copy(cur, props)
		if err := writeProps(n.propsFile, cur); err != nil {
			return err
		}
	}
	release := acquireStartSlot(fmt.Sprintf("kafka node %d", n.ID))
	defer release()
	if err := k.startNode(n); err != nil {
		return err
	}
	return k.WaitBrokers(ctx, len(k.Nodes), 180*time.Second)
}

// RestartNode stops a node, optionally rewrites some of its server.properties, and starts
// it again, waiting until all brokers are back in the metadata.
func (k *Kafka) RestartNode(ctx context.Context, n *Node, props map[string]string) error {
	k.StopNode(n)
	return k.StartNode(ctx, n, props)
}

// Stop stops every node and removes the data dir if the rig made it.
func (k *Kafka) Stop() {
	var wg sync.WaitGroup
	for _, n := range k.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); k.StopNode(n) }()
	}
	wg.Wait()
	if k.ownDir && os.Getenv("KQO_KEEP_RIG") == "" {
		_ = os.RemoveAll(k.Options.Dir)
	}
}

// WaitBrokers waits until every running node answers a Metadata request listing n brokers,
// so that a client may then talk to any of them. A node that exits fails the wait at once
// with its log; on timeout the error says what each node last answered.
func (k *Kafka) WaitBrokers(ctx context.Context, n int, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// One client per node, asked through its seed broker only: a node whose metadata
	// image is behind cannot hide behind another's answer.
	clients := map[int32]*kgo.Client{}
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	last := map[int32]string{}
	for {
		ready := true
		for _, node := range k.Nodes {
			node.mu.Lock()
			running, done := node.cmd != nil, node.done
			node.mu.Unlock()
			if !running {
				continue
			}
			select {
			case <-done:
				return fmt.Errorf("kafka node %d exited; log %s:\n%s", node.ID, node.LogFile, tailFile(node.LogFile, 3000))
			default:
			}
			cl := clients[node.ID]
			if cl == nil {
				var err error
				if cl, err = kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("%s:%d", k.Options.Host, node.Port)), kgo.DialTimeout(2*time.Second)); err != nil {
					return err
				}
				clients[node.ID] = cl
			}
			rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
			req := kmsg.NewPtrMetadataRequest()
			req.Topics = []kmsg.MetadataRequestTopic{} // brokers only
			resp, err := cl.SeedBrokers()[0].Request(rctx, req)
			rcancel()
			switch {
			case err != nil:
				last[node.ID], ready = err.Error(), false
			case len(resp.(*kmsg.MetadataResponse).Brokers) != n:
				var ids []int32
				for _, b := range resp.(*kmsg.MetadataResponse).Brokers {
					ids = append(ids, b.NodeID)
				}
				slices.Sort(ids)
				last[node.ID], ready = fmt.Sprintf("lists brokers %v", ids), false
			default:
				last[node.ID] = "ok"
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			var seen []string
			for _, node := range k.Nodes {
				if v, ok := last[node.ID]; ok {
					seen = append(seen, fmt.Sprintf("node %d: %s", node.ID, v))
				}
			}
			return fmt.Errorf("waiting for %d kafka brokers: %w (last answers: %s)", n, ctx.Err(), strings.Join(seen, "; "))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func writeProps(path string, props map[string]string) error {
	keys := slices.Collect(maps.Keys(props))
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func readProps(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			out[k] = v
		}
	}
	return out, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// warnings returns, per node, the last n WARN or ERROR lines of its server.log and its last
// few lines of any level: what a start that did not finish leaves for diagnosis.
func (k *Kafka) warnings(n int) string {
	const lastLines = 5
	var b strings.Builder
	for _, node := range k.Nodes {
		var warns, all []string
		if f, err := os.Open(node.LogFile); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				l := sc.Text()
				if strings.Contains(l, "] WARN ") || strings.Contains(l, "] ERROR ") {
					warns = append(warns, l)
				}
				all = append(all, l)
			}
			f.Close()
		}
		fmt.Fprintf(&b, "node %d (%s): %d warning line(s)\n", node.ID, node.LogFile, len(warns))
		for _, l := range warns[max(0, len(warns)-n):] {
			fmt.Fprintf(&b, "  %s\n", l)
		}
		fmt.Fprintf(&b, " last %d line(s):\n", lastLines)
		for _, l := range all[max(0, len(all)-lastLines):] {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	return b.String()
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

const log4jConfig = `status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
`
