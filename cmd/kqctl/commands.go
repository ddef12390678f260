package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
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
		return errors.New("-f is required")
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
	res, err := sqsimport.Convert(attrs, sqsimport.Options{Name: *name, Namespace: ns, Cluster: *cluster})
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
	if *cluster == "" || *noCheck {
		return nil
	}
	c, defNS, err := newClient(cf)
	if err != nil {
		return err
	}
	if ns == "" {
		ns = defNS
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var kc kqv1.KafkaCluster
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: *cluster}, &kc); err != nil {
		return fmt.Errorf("reading KafkaCluster %s/%s: %w", ns, *cluster, err)
	}
	problems := sqsimport.Check(res, kc.Status.ShareBounds)
	if len(problems) == 0 {
		fmt.Fprintf(stderr, "check: every value fits KafkaCluster %s/%s's bounds\n", ns, *cluster)
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "check: %s\n", p)
	}
	return fmt.Errorf("%d value(s) would be refused by KafkaCluster %s/%s", len(problems), ns, *cluster)
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
	Lag                *int64 `json:"lag,omitempty"`
	DeadLetterRoute    string `json:"deadLetterRoute,omitempty"`
	Message            string `json:"message,omitempty"`
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
			row.GroupState, row.Members, row.Lag = g.State, g.Members, g.TotalLag
		}
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
		fmt.Fprintln(tw, "NAMESPACE\tNAME\tREADY\tTOPIC\tPARTITIONS\tLEASE\tMAX-ATTEMPTS\tRESERVED\tMAX-IN-FLIGHT\tSTATE-BYTES\tGROUP\tMEMBERS\tLAG\tDLQ")
		for _, r := range rows {
			lag := "-"
			if r.Lag != nil {
				lag = fmt.Sprint(*r.Lag)
			}
			ready := r.Ready
			if r.Reason != "" && r.Ready != "True" {
				ready += " (" + r.Reason + ")"
			}
			reserved := "-"
			if r.ReservedAttempts != nil {
				reserved = fmt.Sprint(*r.ReservedAttempts)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\n", r.Namespace, r.Name, ready, r.Topic, r.Partitions,
				dash(r.Lease), dash(r.MaxAttempts), reserved, r.MaxInFlight, humanBytes(r.InFlightStateBytes), dash(r.GroupState), r.Members, lag, dash(r.DeadLetterRoute))
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
			mode = string(r.Spec.Mode) + ", not reconciled yet"
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
	file string
}

// planFieldOwner is the field manager of plan's server-side dry-run applies.
const planFieldOwner = "kqctl"

// progressEvery and progressInterval pace plan's progress line on stderr: after every
// progressEvery manifests, or when progressInterval passed since the last line.
const (
	progressEvery    = 50
	progressInterval = 2 * time.Second
)

// planCounts are what plan found, for its exit status.
type planCounts struct {
	queues, invalid, unplanned, refused int
}

func (o *planOptions) run(cf *genericclioptions.ConfigFlags, stdout, stderr io.Writer) error {
	if o.file == "" {
		return errors.New("-f is required")
	}
	data, err := os.ReadFile(o.file)
	if err != nil {
		return err
	}
	docs, err := decodeManifests(data)
	if err != nil {
		return fmt.Errorf("%s: %w", o.file, err)
	}
	// Manifests without a namespace get -n, else the kubeconfig's.
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	// One Kafka client per KafkaCluster for the whole run.
	pv := controllers.NewPreviewer(c)
	defer pv.Close()
	var n planCounts
	start, last := time.Now(), time.Now()
	for i, u := range docs {
		o.planOne(c, pv, ns, u, stdout, &n)
		if done := i + 1; done < len(docs) && (done%progressEvery == 0 || time.Since(last) >= progressInterval) {
			fmt.Fprintf(stderr, "plan: %d of %d manifests (%s)\n", done, len(docs), time.Since(start).Round(time.Second))
			last = time.Now()
		}
	}
	var problems []string
	if n.invalid > 0 {
		problems = append(problems, fmt.Sprintf("%d manifest(s) refused by the apiserver", n.invalid))
	}
	if n.unplanned > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d ShareQueue(s) could not be planned", n.unplanned, n.queues))
	}
	if n.refused > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d ShareQueue(s) have changes the brokers refuse", n.refused, n.queues))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	if n.queues == 0 {
		return errors.New("no ShareQueue in " + o.file)
	}
	return nil
}

// decodeManifests reads every YAML or JSON document of a manifest file (a List's items
// count one by one); empty documents are skipped.
func decodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: raw}
		if u.IsList() {
			if err := u.EachListItem(func(obj runtime.Object) error {
				out = append(out, obj.(*unstructured.Unstructured))
				return nil
			}); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, u)
	}
}

// planOne sends one manifest through a server-side dry-run apply (the apiserver's own
// schema, unknown-field check, defaults and CEL rules; nothing is stored) and, for a
// ShareQueue, plans the object the apiserver returned against live Kafka, the brokers
// validating its writes.
func (o *planOptions) planOne(c client.Client, pv *controllers.Previewer, ns string, u *unstructured.Unstructured, stdout io.Writer, n *planCounts) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kind := u.GetKind()
	isQueue := u.GroupVersionKind().GroupKind() == kqv1.GroupVersion.WithKind("ShareQueue").GroupKind()
	if isQueue {
		n.queues++
	}
	if u.GetNamespace() == "" {
		if namespaced, err := c.IsObjectNamespaced(u); err == nil && namespaced {
			u.SetNamespace(ns)
		}
	}
	name := u.GetName()
	if u.GetNamespace() != "" {
		name = u.GetNamespace() + "/" + name
	}
	if kind == "" {
		kind = "object"
	}
	err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.DryRunAll, client.FieldOwner(planFieldOwner), client.ForceOwnership)
	if err != nil {
		n.invalid++
		if isQueue {
			n.unplanned++
		}
		fmt.Fprintf(stdout, "%s %s: refused by the apiserver (server-side dry run): %v\n\n", kind, name, err)
		return
	}
	if !isQueue {
		fmt.Fprintf(stdout, "%s %s: accepted by the apiserver (server-side dry run)\n\n", kind, name)
		return
	}
	var sq kqv1.ShareQueue
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sq); err != nil {
		n.unplanned++
		fmt.Fprintf(stdout, "ShareQueue %s: cannot plan: %v\n\n", name, err)
		return
	}
	p, err := pv.Preview(ctx, &sq)
	if err != nil {
		n.unplanned++
		fmt.Fprintf(stdout, "ShareQueue %s/%s: cannot plan: %v\n\n", sq.Namespace, sq.Name, err)
		return
	}
	printPreview(stdout, p)
	if len(p.Refused) > 0 {
		n.refused++
	}
}

func printPreview(stdout io.Writer, p *controllers.Preview) {
	fmt.Fprintf(stdout, "ShareQueue %s\n", p.Queue)
	if p.Conflict != "" {
		fmt.Fprintf(stdout, "  CONFLICT: %s\n", p.Conflict)
	}
	if len(p.Changes) == 0 {
		fmt.Fprintln(stdout, "  no changes")
	}
	for _, ch := range p.Changes {
		fmt.Fprintf(stdout, "  ~ %s\n", ch)
	}
	for _, r := range p.Refused {
		fmt.Fprintf(stdout, "  REFUSED: %s\n", r)
	}
	if p.Unchecked != "" {
		fmt.Fprintf(stdout, "  NOT VALIDATED (the brokers could not be asked): %s\n", p.Unchecked)
	}
	keys := make([]string, 0, len(p.Conditions))
	for k := range p.Conditions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(stdout, "  %s: %s\n", k, p.Conditions[k])
	}
	if p.Capacity != nil {
		fmt.Fprintf(stdout, "  capacity: %d in-flight records, %s of broker state\n", p.Capacity.MaxInFlightRecords, humanBytes(p.Capacity.InFlightStateBytes))
	}
	fmt.Fprintln(stdout)
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
