package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/duration"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/resource"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/sqsimport"
)

// newClient builds a client from the kubeconfig flags (--kubeconfig, --context, -n, --as, ...)
// and returns the namespace they select: -n, else the context's, else default.
func newClient(cf *genericclioptions.ConfigFlags) (client.Client, string, error) {
	cfg, err := cf.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	if ns == "" {
		ns = "default"
	}
	// client-go's default of 5 requests/s made a 1,000-queue plan take minutes; kubectl's
	// discovery uses 50/300.
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 50, 100
	}
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = kqv1.AddToScheme(scheme)
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return c, ns, err
}

// runImportSQS runs `kqctl import sqs args...`.
func runImportSQS(args []string, stdout, stderr io.Writer) error {
	return run(append([]string{"import", "sqs"}, args...), stdout, stderr)
}

type importOptions struct {
	file, name        string
	kafkaCluster      string
	deprecatedCluster string // --cluster, the old name of --kafka-cluster
	noCheck           bool
}

func (o *importOptions) run(cf *genericclioptions.ConfigFlags, stdout, stderr io.Writer) error {
	file, name, cluster, noCheck := &o.file, &o.name, &o.kafkaCluster, &o.noCheck
	// -n names the generated resources' namespace; without it they have none and the
	// check looks in the kubeconfig's namespace.
	ns := *cf.Namespace
	if *file == "" {
		return usageError{"-f is required: the SQS attributes JSON file, or - for stdin"}
	}
	var data []byte
	var err error
	if *file == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	attrs, err := sqsimport.Parse(data)
	if err != nil {
		return err
	}
	check := *cluster != "" && !*noCheck
	opts := sqsimport.Options{Name: *name, Namespace: ns, Cluster: *cluster}
	var c client.Client
	var kc kqv1.KafkaCluster
	ctx, cancel := context.WithTimeout(context.Background(), defaultPlanTimeout)
	defer cancel()
	if check {
		// The cluster is read first: the dead-letter topic takes its brokers' prefix.
		var defNS string
		if c, defNS, err = newClient(cf); err != nil {
			return err
		}
		if ns == "" {
			ns = defNS
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *cluster}, &kc); err != nil {
			return fmt.Errorf("reading KafkaCluster %s/%s: %w", ns, *cluster, err)
		}
		opts.DeadLetterPrefix = kc.Status.DeadLetterPrefix()
	}
	res, err := sqsimport.Convert(attrs, opts)
	if err != nil {
		return err
	}
	out, err := sqsimport.Render(res)
	if err != nil {
		return err
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	if !check {
		return nil
	}
	problems := sqsimport.Check(res, kc.Status.ShareBounds)
	problems = append(problems, planImport(ctx, c, ns, res)...)
	if len(problems) == 0 {
		fmt.Fprintf(stderr, "check: every value fits KafkaCluster %s/%s's bounds, and planned against it the queue and its route would become Ready\n", ns, *cluster)
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "check: %s\n", p)
	}
	return fmt.Errorf("%d problem(s) against KafkaCluster %s/%s", len(problems), ns, *cluster)
}

// planImport plans the imported queue and route against the live cluster as kqctl plan does
// (the reconcilers' plans, the brokers validating the writes) and returns what would keep
// either from becoming Ready there; bound violations are sqsimport.Check's.
func planImport(ctx context.Context, c client.Client, ns string, res *sqsimport.Result) []string {
	pv := controllers.NewPreviewer(c)
	defer pv.Close()
	sq := res.Queue.DeepCopy()
	sq.Namespace = ns
	var dlr *kqv1.DeadLetterRoute
	if res.Route != nil {
		dlr = res.Route.DeepCopy()
		dlr.Namespace = ns
		pv.ExpectRoute(dlr) // the queue is planned with its route (a reserved attempt)
	}
	var out []string
	// The apiserver's verdict first, as kubectl apply would meet it: an object of that name
	// that exists already would be changed (or refused, for an immutable field).
	for _, obj := range []client.Object{sq, dlr} {
		if obj == nil || reflect.ValueOf(obj).IsNil() {
			continue
		}
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		existing := obj.DeepCopyObject().(client.Object)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), existing); err == nil {
			out = append(out, fmt.Sprintf("%s %s/%s already exists: applying this output would change it; import under another --name, or compare with `kubectl diff`", kind, ns, obj.GetName()))
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return append(out, err.Error())
		}
		probe := &unstructured.Unstructured{Object: u}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(probe), client.DryRunAll, client.FieldOwner(planFieldOwner), client.ForceOwnership); err != nil {
			out = append(out, fmt.Sprintf("%s %s/%s refused by the apiserver (server-side dry run): %v", kind, ns, obj.GetName(), err))
		}
	}
	p, err := pv.Preview(ctx, sq)
	if err != nil {
		return append(out, fmt.Sprintf("ShareQueue %s cannot be planned: %v", sq.Name, err))
	}
	if p.Conflict != "" {
		out = append(out, fmt.Sprintf("ShareQueue %s: %s", sq.Name, p.Conflict))
	}
	out = append(out, p.Refused...)
	if dlr == nil {
		return out
	}
	rp, err := pv.PreviewRoute(ctx, dlr)
	switch {
	case err != nil:
		out = append(out, fmt.Sprintf("DeadLetterRoute %s cannot be planned: %v", dlr.Name, err))
	case rp.Conflict != "":
		out = append(out, fmt.Sprintf("DeadLetterRoute %s: %s", dlr.Name, rp.Conflict))
	case len(rp.Refused) > 0:
		out = append(out, rp.Refused...)
	case !strings.HasPrefix(rp.Conditions[kqv1.ConditionRouteActive], "True/"):
		out = append(out, fmt.Sprintf("DeadLetterRoute %s would not be active: RouteActive %s", dlr.Name, rp.Conditions[kqv1.ConditionRouteActive]))
	}
	return out
}

// queueRow is one line of kqctl status.
type queueRow struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Ready              string `json:"ready"`
	Reason             string `json:"reason,omitempty"`
	Topic              string `json:"topic"`
	Partitions         int32  `json:"partitions"`
	Lease              string `json:"lease,omitempty"`
	MaxAttempts        string `json:"maxAttempts,omitempty"`
	ReservedAttempts   *int32 `json:"reservedAttempts,omitempty"` // attempts kept from the app by a Republisher route
	MaxInFlight        int64  `json:"maxInFlightRecords,omitempty"`
	InFlightStateBytes int64  `json:"inFlightStateBytes,omitempty"`
	GroupState         string `json:"groupState,omitempty"`
	Members            int32  `json:"members"`
	// Backlog, OldestAgeSeconds, DeadLetters, UnreadPartitions, DepthObservedAt and
	// DepthError are status.depth (the depth poller's read at DepthObservedAt; the age is
	// measured to that moment).
	Backlog          *int64  `json:"backlog,omitempty"`
	OldestAgeSeconds *int64  `json:"oldestAgeSeconds,omitempty"`
	DeadLetters      *int64  `json:"deadLetters,omitempty"`
	UnreadPartitions []int32 `json:"unreadPartitions,omitempty"`
	DepthObservedAt  string  `json:"depthObservedAt,omitempty"`
	DepthError       string  `json:"depthError,omitempty"`
	DeadLetterRoute  string  `json:"deadLetterRoute,omitempty"`
	Message          string  `json:"message,omitempty"`
}

// depthColumns fills a row's depth figures from status.depth.
func (row *queueRow) depthColumns(d *kqv1.QueueDepthStatus) {
	if d == nil {
		return
	}
	row.Backlog, row.DeadLetters, row.UnreadPartitions, row.DepthError = d.Backlog, d.DeadLetters, d.UnreadPartitions, d.Error
	row.DepthObservedAt = d.ObservedAt.UTC().Format(time.RFC3339)
	if d.OldestRecordTime != nil {
		age := int64(max(d.ObservedAt.Sub(d.OldestRecordTime.Time), 0) / time.Second)
		row.OldestAgeSeconds = &age
	}
}

// backlogCell prints the backlog, marked partial when partitions were left out, or why it
// could not be read.
func (row *queueRow) backlogCell() string {
	switch {
	case row.DepthError != "":
		return "unreadable"
	case row.Backlog == nil:
		return "-"
	case len(row.UnreadPartitions) > 0:
		return fmt.Sprintf("%d (partial: %d partitions unread)", *row.Backlog, len(row.UnreadPartitions))
	}
	return fmt.Sprint(*row.Backlog)
}

// observedCell prints how long before now the depth was read.
func (row *queueRow) observedCell(now time.Time) string {
	t, err := time.Parse(time.RFC3339, row.DepthObservedAt)
	if err != nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

// runStatus runs `kqctl status args...`.
func runStatus(args []string, stdout io.Writer) error {
	return run(append([]string{"status"}, args...), stdout, os.Stderr)
}

type statusOptions struct {
	allNamespaces bool
	output        string
}

func (o *statusOptions) run(cf *genericclioptions.ConfigFlags, stdout io.Writer) error {
	all, output := &o.allNamespaces, &o.output
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	var opts []client.ListOption
	if !*all {
		opts = append(opts, client.InNamespace(ns))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var queues kqv1.ShareQueueList
	if err := c.List(ctx, &queues, opts...); err != nil {
		return err
	}
	var routes kqv1.DeadLetterRouteList
	if err := c.List(ctx, &routes, opts...); err != nil {
		return err
	}
	routeOf := routeColumn(routes.Items)
	rows := make([]queueRow, 0, len(queues.Items))
	for _, q := range queues.Items {
		row := queueRow{Namespace: q.Namespace, Name: q.Name, Topic: q.Status.TopicName, Partitions: q.Status.Partitions, Ready: "Unknown",
			DeadLetterRoute: routeOf[q.Namespace+"/"+q.Name]}
		if c := meta.FindStatusCondition(q.Status.Conditions, kqv1.ConditionReady); c != nil {
			row.Ready, row.Reason = string(c.Status), c.Reason
			if c.Status != "True" {
				row.Message = c.Message
			}
		}
		if e := q.Status.Effective; e != nil {
			if e.LockDuration != nil {
				row.Lease = e.LockDuration.Value
			}
			if e.MaxDeliveryAttempts != nil {
				row.MaxAttempts = e.MaxDeliveryAttempts.Value
			}
			row.ReservedAttempts = e.ReservedAttempts
		}
		if cp := q.Status.Capacity; cp != nil {
			row.MaxInFlight, row.InFlightStateBytes = cp.MaxInFlightRecords, cp.InFlightStateBytes
		}
		if g := q.Status.Group; g != nil {
			row.GroupState, row.Members = g.State, g.Members
		}
		row.depthColumns(q.Status.Depth)
		rows = append(rows, row)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Namespace+"/"+rows[i].Name < rows[j].Namespace+"/"+rows[j].Name })
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	case "yaml":
		b, err := yaml.Marshal(rows)
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	case "table":
		tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tREADY\tTOPIC\tPARTITIONS\tLEASE\tMAX-ATTEMPTS\tRESERVED\tMAX-IN-FLIGHT\tSTATE-BYTES\tGROUP\tMEMBERS\tBACKLOG\tOLDEST\tDEAD-LETTERS\tOBSERVED\tDLQ")
		now := time.Now()
		for _, r := range rows {
			oldest, dead := "-", "-"
			if r.OldestAgeSeconds != nil {
				oldest = duration.HumanDuration(time.Duration(*r.OldestAgeSeconds) * time.Second)
			}
			if r.DeadLetters != nil {
				dead = fmt.Sprint(*r.DeadLetters)
			}
			ready := r.Ready
			if r.Reason != "" && r.Ready != "True" {
				ready += " (" + r.Reason + ")"
			}
			reserved := "-"
			if r.ReservedAttempts != nil {
				reserved = fmt.Sprint(*r.ReservedAttempts)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Name, ready, r.Topic, r.Partitions,
				dash(r.Lease), dash(r.MaxAttempts), reserved, r.MaxInFlight, humanBytes(r.InFlightStateBytes), dash(r.GroupState), r.Members,
				r.backlogCell(), oldest, dead, r.observedCell(now), dash(r.DeadLetterRoute))
		}
		return tw.Flush()
	default:
		return fmt.Errorf("-o %q: want table, yaml or json", *output)
	}
}

// routeColumn describes each queue's owning DeadLetterRoute (kqv1.OwningRoute, the one the
// operator acts on; others are in Conflict), keyed by namespace/queue.
func routeColumn(routes []kqv1.DeadLetterRoute) map[string]string {
	byQueue := map[string][]kqv1.DeadLetterRoute{}
	for _, r := range routes {
		k := r.Namespace + "/" + r.Spec.QueueRef.Name
		byQueue[k] = append(byQueue[k], r)
	}
	out := make(map[string]string, len(byQueue))
	for k, rs := range byQueue {
		r := kqv1.OwningRoute(rs)
		if r == nil {
			continue
		}
		topic := r.Status.TopicName
		if topic == "" {
			topic = r.Spec.Topic.Name
		}
		mode := string(r.Status.EffectiveMode)
		if mode == "" {
			// No mode resolved: a route that was reconciled and is not Ready (a Conflict,
			// a queue not ready) says why, as its Ready condition does; only a route with no
			// Ready condition yet is "not reconciled yet".
			if c := meta.FindStatusCondition(r.Status.Conditions, kqv1.ConditionReady); c != nil && !meta.IsStatusConditionTrue(r.Status.Conditions, kqv1.ConditionReady) {
				mode = string(r.Spec.Mode) + ", " + c.Reason
			} else {
				mode = string(r.Spec.Mode) + ", not reconciled yet"
			}
		}
		out[k] = fmt.Sprintf("%s (%s → %s)", r.Name, mode, topic)
	}
	return out
}

// runPlan runs `kqctl plan args...`.
func runPlan(args []string, stdout io.Writer) error {
	return run(append([]string{"plan"}, args...), stdout, os.Stderr)
}

type planOptions struct {
	// files is kubectl's -f, -k and -R (cli-runtime's FilenameOptions): files, directories,
	// URLs, - for stdin, or a kustomization directory.
	files resource.FilenameOptions
	// stdin is read for -f - (os.Stdin when nil).
	stdin io.Reader
}

// single is the one file (or - for stdin) plan reads itself, reporting each document by
// number and line; "" when the manifests come through cli-runtime's builder (several -f,
// a directory, a URL, -R or -k).
func (o *planOptions) single() string {
	if fs := o.files.Filenames; len(fs) == 1 && o.files.Kustomize == "" && !o.files.Recursive {
		if fs[0] == "-" {
			return fs[0]
		}
		if st, err := os.Stat(fs[0]); err == nil && st.Mode().IsRegular() {
			return fs[0]
		}
	}
	return ""
}

// read returns the manifests to plan, the documents that are none, and the source's name.
func (o *planOptions) read(cf *genericclioptions.ConfigFlags) (docs []*manifest, bad []badDocument, source string, err error) {
	if f := o.single(); f != "" {
		var data []byte
		if f == "-" {
			in := o.stdin
			if in == nil {
				in = os.Stdin
			}
			data, err = io.ReadAll(in)
			source = "stdin"
		} else {
			data, err = os.ReadFile(f)
			source = f
		}
		if err != nil {
			return nil, nil, "", err
		}
		docs, bad = splitManifests(data)
		return docs, bad, source, nil
	}
	// As kubectl reads them: directories (-R for their subdirectories), URLs, globs, a
	// kustomization (-k), Lists flattened. Local: nothing is asked of the server here.
	r := resource.NewBuilder(cf).Local().Unstructured().ContinueOnError().FilenameParam(false, &o.files).Flatten().Do()
	infos, rerr := r.Infos()
	for i, info := range infos {
		u, ok := info.Object.(*unstructured.Unstructured)
		if !ok {
			bad = append(bad, badDocument{index: i + 1, err: fmt.Errorf("%s: not an object", info.Source)})
			continue
		}
		docs = append(docs, &manifest{index: i + 1, obj: u})
	}
	if rerr != nil {
		for _, e := range flattenErrors(rerr) {
			bad = append(bad, badDocument{err: e})
		}
	}
	source = strings.Join(o.files.Filenames, ", ")
	if o.files.Kustomize != "" {
		source = "kustomization " + o.files.Kustomize
	}
	return docs, bad, source, nil
}

// flattenErrors lists an aggregate's errors one by one.
func flattenErrors(err error) []error {
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		return utilerrors.Flatten(agg).Errors()
	}
	return []error{err}
}

// planFieldOwner is the field manager of plan's server-side dry-run applies.
const planFieldOwner = "kqctl"

// progressEvery and progressInterval pace plan's progress line on stderr: after every
// progressEvery manifests, or when progressInterval passed since the last line.
const (
	progressEvery    = 50
	progressInterval = 2 * time.Second
)

// defaultPlanTimeout bounds the planning of one manifest (its apiserver and Kafka requests)
// when --request-timeout is not given.
const defaultPlanTimeout = 60 * time.Second

// planCounts are what plan found, for its exit status.
type planCounts struct {
	planned, invalid, unplanned, refused int
}

// manifest is one document of a manifest file.
type manifest struct {
	index, line int // 1-based document number and its first line
	obj         *unstructured.Unstructured
	// name is "Kind namespace/name" once its namespace is set.
	name string
}

// planRun is one kqctl plan: the manifests, the client, the counts and the progress line.
type planRun struct {
	c  client.Client
	pv *controllers.Previewer
	ns string
	// explicitNS is -n when given: a manifest in another namespace is refused, as kubectl does.
	explicitNS     string
	timeout        time.Duration
	stdout, stderr io.Writer
	n              planCounts
	// phase, total and done drive the progress line of the current phase.
	phase       string
	total, done int
	start, last time.Time
}

func (o *planOptions) run(cf *genericclioptions.ConfigFlags, stdout, stderr io.Writer) error {
	if len(o.files.Filenames) == 0 && o.files.Kustomize == "" {
		return usageError{"-f is required: a manifest file, a directory, a URL, or - for stdin (or -k for a kustomization)"}
	}
	if len(o.files.Filenames) > 0 && o.files.Kustomize != "" {
		return usageError{"-f and -k cannot be given together"}
	}
	if o.files.Kustomize != "" && o.files.Recursive {
		return usageError{"-R goes with -f, not -k"}
	}
	docs, bad, source, err := o.read(cf)
	if err != nil {
		return err
	}
	timeout, err := requestTimeout(cf)
	if err != nil {
		return usageError{err.Error()}
	}
	// Manifests without a namespace get -n, else the kubeconfig's.
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	// One Kafka client per KafkaCluster for the whole run.
	pv := controllers.NewPreviewer(c)
	defer pv.Close()
	r := &planRun{c: c, pv: pv, ns: ns, explicitNS: *cf.Namespace, timeout: timeout, stdout: stdout, stderr: stderr,
		phase: "checked by the apiserver", total: len(docs) + len(bad), start: time.Now(), last: time.Now()}
	for _, b := range bad {
		r.n.invalid++
		if b.line > 0 {
			fmt.Fprintf(stdout, "%s document %d (line %d): not a manifest: %v\n\n", source, b.index, b.line, b.err)
		} else {
			fmt.Fprintf(stdout, "not a manifest: %v\n\n", b.err)
		}
		r.progress()
	}
	// Every manifest first goes through the server-side dry run, in file order; then the
	// KafkaClusters, ShareQueues and DeadLetterRoutes among them are planned in that order,
	// each seeing the ones before it (a queue its new cluster and its route, a route its
	// queue's planned writes).
	created := map[string]bool{} // namespaces these manifests create
	var clusters, queues, routes []*manifest
	for _, m := range docs {
		accepted := r.dryRun(m, created)
		r.progress()
		if !accepted {
			pv.Refused(m.obj.GetKind(), m.obj.GetNamespace(), m.obj.GetName())
			continue
		}
		switch gk := m.obj.GroupVersionKind().GroupKind(); {
		case gk == kqv1.GroupVersion.WithKind("KafkaCluster").GroupKind():
			clusters = append(clusters, m)
		case gk == kqv1.GroupVersion.WithKind("ShareQueue").GroupKind():
			queues = append(queues, m)
		case gk == kqv1.GroupVersion.WithKind("DeadLetterRoute").GroupKind():
			routes = append(routes, m)
		default:
			switch gk {
			case corev1.SchemeGroupVersion.WithKind("Secret").GroupKind():
				var sec corev1.Secret
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, &sec); err == nil {
					pv.AddSecret(&sec) // a first install's credentials
				}
			case schema.GroupKind{Group: "kafka.strimzi.io", Kind: "KafkaTopic"}:
				pv.AddKafkaTopic(m.obj)
			}
			fmt.Fprintf(stdout, "%s: accepted by the apiserver (server-side dry run)\n\n", m.name)
		}
	}
	typed := make(map[*manifest]client.Object, len(clusters)+len(queues)+len(routes))
	for _, set := range []struct {
		ms  []*manifest
		new func() client.Object
	}{{clusters, func() client.Object { return &kqv1.KafkaCluster{} }}, {queues, func() client.Object { return &kqv1.ShareQueue{} }},
		{routes, func() client.Object { return &kqv1.DeadLetterRoute{} }}} {
		for _, m := range set.ms {
			obj := set.new()
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.obj.Object, obj); err != nil {
				r.n.unplanned++
				fmt.Fprintf(stdout, "%s: cannot plan: %v\n\n", m.name, err)
				continue
			}
			typed[m] = obj
			switch o := obj.(type) {
			case *kqv1.DeadLetterRoute:
				pv.ExpectRoute(o)
			case *kqv1.ShareQueue:
				pv.ExpectQueue(o)
			}
		}
	}
	planned := append(append(clusters, queues...), routes...)
	r.phase, r.total, r.done, r.last = "planned", len(planned), 0, time.Now()
	for _, m := range planned {
		if obj, ok := typed[m]; ok {
			r.planOne(m, obj)
		}
		r.progress()
	}
	var problems []string
	if r.n.invalid > 0 {
		problems = append(problems, fmt.Sprintf("%d manifest(s) refused by the apiserver or unreadable", r.n.invalid))
	}
	if r.n.unplanned > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d KafkaCluster/ShareQueue/DeadLetterRoute manifest(s) could not be planned", r.n.unplanned, r.n.planned))
	}
	if r.n.refused > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d have changes the brokers refuse", r.n.refused, r.n.planned))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	if r.n.planned == 0 {
		return errors.New("no KafkaCluster, ShareQueue or DeadLetterRoute in " + source)
	}
	return nil
}

// requestTimeout is --request-timeout as the bound of one manifest's planning: kubectl's
// syntax (a bare number is seconds), defaultPlanTimeout when the flag is not given, and no
// bound for zero (as in kubectl; each Kafka request still gives up after the client's own
// retry timeout). A negative or malformed value is an error.
func requestTimeout(cf *genericclioptions.ConfigFlags) (time.Duration, error) {
	if cf.Timeout == nil || *cf.Timeout == "" {
		return defaultPlanTimeout, nil
	}
	v := *cf.Timeout
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, serr := strconv.ParseInt(v, 10, 64)
		if serr != nil {
			return 0, fmt.Errorf("--request-timeout %q: want a duration such as 30s or 2m", v)
		}
		d = time.Duration(secs) * time.Second
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("--request-timeout %q: must not be negative", v)
	case d == 0:
		return 0, nil
	}
	return d, nil
}

// manifestContext is the context of one manifest's requests: bounded by the timeout, or not
// at all when it is 0.
func (r *planRun) manifestContext() (context.Context, context.CancelFunc) {
	if r.timeout <= 0 {
		return context.WithCancel(context.Background())
	}
	return context.WithTimeout(context.Background(), r.timeout)
}

// progress counts a manifest finished in the current phase (the dry runs, then the plans)
// and prints the progress line when due.
func (r *planRun) progress() {
	r.done++
	if r.done < r.total && (r.done%progressEvery == 0 || time.Since(r.last) >= progressInterval) {
		fmt.Fprintf(r.stderr, "plan: %d of %d manifests %s (%s)\n", r.done, r.total, r.phase, time.Since(r.start).Round(time.Second))
		r.last = time.Now()
	}
}

// badDocument is a document of the file that is not a manifest.
type badDocument struct {
	index, line int
	err         error
}

// splitManifests reads every document of a manifest file: YAML documents split at "---"
// lines, each of which may also be a stream of JSON objects (a JSON file, or `kubectl get -o
// json` output concatenated); a List's items count one by one. Empty documents are skipped; a
// document that is not valid YAML or JSON, or not an object with apiVersion and kind, is
// returned in bad with its number and first line, and the others are still read.
func splitManifests(data []byte) (docs []*manifest, bad []badDocument) {
	type chunk struct {
		line int
		text []byte
	}
	var chunks []chunk
	start, cur := 1, []byte{}
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		if sep := bytes.TrimRight(l, "\r\n"); bytes.Equal(sep, []byte("---")) || bytes.HasPrefix(sep, []byte("--- ")) || bytes.HasPrefix(sep, []byte("---\t")) {
			chunks = append(chunks, chunk{start, cur})
			start, cur = i+2, []byte{}
			continue
		}
		cur = append(cur, l...)
	}
	chunks = append(chunks, chunk{start, cur})
	index := 0
	add := func(line int, raw map[string]any) {
		u := &unstructured.Unstructured{Object: raw}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			bad = append(bad, badDocument{index, line, errors.New("apiVersion and kind are required")})
			return
		}
		if !u.IsList() {
			docs = append(docs, &manifest{index: index, line: line, obj: u})
			return
		}
		n := 0
		if err := u.EachListItem(func(obj runtime.Object) error {
			n++
			item := obj.(*unstructured.Unstructured)
			if item.GetAPIVersion() == "" || item.GetKind() == "" {
				return fmt.Errorf("item %d: apiVersion and kind are required", n)
			}
			docs = append(docs, &manifest{index: index, line: line, obj: item})
			return nil
		}); err != nil {
			bad = append(bad, badDocument{index, line, err})
		}
	}
	for _, ch := range chunks {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(ch.text), 4096)
		for {
			var raw map[string]any
			err := dec.Decode(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil && len(raw) == 0 {
				continue // empty or comments only
			}
			index++
			if err != nil {
				bad = append(bad, badDocument{index, ch.line, err})
				break
			}
			add(ch.line, raw)
		}
	}
	return docs, bad
}

// dryRun sends one manifest through a server-side dry-run apply (the apiserver's own schema,
// unknown-field check, defaults and CEL rules; nothing is stored) and keeps the object the
// apiserver returned. A namespaced object in a namespace that these manifests create (which
// the apiserver cannot dry-run into) is checked in another namespace under a name of its own,
// so no existing object there is merged into it; it keeps its own namespace and name after.
// It reports whether the apiserver accepted it.
func (r *planRun) dryRun(m *manifest, created map[string]bool) bool {
	ctx, cancel := r.manifestContext()
	defer cancel()
	u := m.obj
	namespaced, nsErr := r.c.IsObjectNamespaced(u)
	if u.GetNamespace() == "" && nsErr == nil && namespaced {
		u.SetNamespace(r.ns)
	}
	m.name = u.GetKind() + " " + u.GetName()
	if u.GetNamespace() != "" {
		m.name = u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
	}
	ns, name := u.GetNamespace(), u.GetName()
	refuse := func(err error) bool {
		r.n.invalid++
		fmt.Fprintf(r.stdout, "%s: refused by the apiserver (server-side dry run): %v\n\n", m.name, err)
		return false
	}
	if r.explicitNS != "" && namespaced && ns != r.explicitNS {
		// kubectl's rule: -n and the manifest's namespace must agree.
		return refuse(fmt.Errorf("the namespace from the provided object %q does not match the namespace %q: you must pass --namespace=%s", ns, r.explicitNS, ns))
	}
	apply := func(obj *unstructured.Unstructured) error {
		return r.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.DryRunAll, client.FieldOwner(planFieldOwner), client.ForceOwnership)
	}
	err := apply(u)
	if err != nil && apierrors.IsNotFound(err) && created[ns] {
		if other := r.stagingNamespace(created, ns); other != "" {
			probe := u.DeepCopy()
			probe.SetNamespace(other)
			probe.SetName(fmt.Sprintf("kqctl-plan-%08x", rand.Uint32()))
			if err = apply(probe); err == nil {
				probe.SetNamespace(ns)
				probe.SetName(name)
				delete(probe.Object, "status")
				m.obj = probe
				fmt.Fprintf(r.stdout, "%s: namespace %s is created by these manifests, so the dry run ran in namespace %s\n", m.name, ns, other)
			}
		}
	}
	if err != nil {
		return refuse(err)
	}
	if u.GroupVersionKind().GroupKind() == corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind() {
		created[u.GetName()] = true
	}
	return true
}

// stagingNamespace is where an object of a namespace the manifests create is dry-run: the
// kubeconfig's namespace, else default, whichever exists now and is neither ns nor created by
// the manifests; "" when none is.
func (r *planRun) stagingNamespace(created map[string]bool, ns string) string {
	for _, cand := range []string{r.ns, "default"} {
		if cand != ns && !created[cand] {
			return cand
		}
	}
	return ""
}

// planOne plans one KafkaCluster, ShareQueue or DeadLetterRoute (the object the dry run
// returned) against live Kafka, the brokers validating its writes, and prints the plan.
func (r *planRun) planOne(m *manifest, obj client.Object) {
	ctx, cancel := r.manifestContext()
	defer cancel()
	r.n.planned++
	var err error
	switch o := obj.(type) {
	case *kqv1.KafkaCluster:
		var p *controllers.ClusterPreview
		if p, err = r.pv.PreviewCluster(ctx, o); err == nil {
			printClusterPreview(r.stdout, p)
		}
	case *kqv1.ShareQueue:
		var p *controllers.Preview
		if p, err = r.pv.Preview(ctx, o); err == nil {
			printPreview(r.stdout, p)
			if len(p.Refused) > 0 {
				r.n.refused++
			}
		}
	case *kqv1.DeadLetterRoute:
		var p *controllers.RoutePreview
		if p, err = r.pv.PreviewRoute(ctx, o); err == nil {
			printRoutePreview(r.stdout, p)
			if len(p.Refused) > 0 {
				r.n.refused++
			}
		}
	}
	if err != nil {
		r.n.unplanned++
		fmt.Fprintf(r.stdout, "%s: cannot plan: %v\n\n", m.name, err)
	}
}

func printClusterPreview(stdout io.Writer, p *controllers.ClusterPreview) {
	fmt.Fprintf(stdout, "KafkaCluster %s\n", p.Cluster)
	fmt.Fprintf(stdout, "  cluster id %s: %d broker(s), share.version %d\n", p.Status.ClusterID, p.Status.BrokerCount, p.Status.ShareVersion)
	if len(p.Changes) == 0 {
		fmt.Fprintln(stdout, "  no changes")
	}
	for _, ch := range p.Changes {
		fmt.Fprintf(stdout, "  ~ %s\n", ch)
	}
	printConditions(stdout, p.Conditions)
	fmt.Fprintln(stdout)
}

func printRoutePreview(stdout io.Writer, p *controllers.RoutePreview) {
	fmt.Fprintf(stdout, "DeadLetterRoute %s (queue %s)\n", p.Route, p.Queue)
	if p.Conflict == "" {
		fmt.Fprintf(stdout, "  mode %s, dead-letter topic %s\n", dash(string(p.Mode)), p.TopicName)
	}
	changes := append([]string(nil), p.Changes...)
	for _, ch := range p.QueueChanges {
		changes = append(changes, fmt.Sprintf("(by ShareQueue %s's reconcile, for this route) %s", p.Queue, ch))
	}
	printFindings(stdout, p.Conflict, changes, p.Refused, p.Unchecked, p.Conditions)
	fmt.Fprintln(stdout)
}

func printPreview(stdout io.Writer, p *controllers.Preview) {
	fmt.Fprintf(stdout, "ShareQueue %s\n", p.Queue)
	printFindings(stdout, p.Conflict, p.Changes, p.Refused, p.Unchecked, p.Conditions)
	if p.Capacity != nil {
		fmt.Fprintf(stdout, "  capacity: %d in-flight records, %s of broker state\n", p.Capacity.MaxInFlightRecords, humanBytes(p.Capacity.InFlightStateBytes))
	}
	fmt.Fprintln(stdout)
}

// printFindings prints a plan's conflict, changes (or "no changes"), the brokers' refusals,
// the checks not made and the conditions, sorted by type.
func printFindings(stdout io.Writer, conflict string, changes, refused []string, unchecked string, conds map[string]string) {
	if conflict != "" {
		fmt.Fprintf(stdout, "  CONFLICT: %s\n", conflict)
	}
	if len(changes) == 0 {
		fmt.Fprintln(stdout, "  no changes")
	}
	for _, ch := range changes {
		fmt.Fprintf(stdout, "  ~ %s\n", ch)
	}
	for _, r := range refused {
		fmt.Fprintf(stdout, "  REFUSED: %s\n", r)
	}
	if unchecked != "" {
		fmt.Fprintf(stdout, "  NOT CHECKED: %s\n", unchecked)
	}
	printConditions(stdout, conds)
}

func printConditions(stdout io.Writer, conds map[string]string) {
	keys := make([]string, 0, len(conds))
	for k := range conds {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %s: %s\n", k, conds[k])
	}
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%dB", n)
	}
}
