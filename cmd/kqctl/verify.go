package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/kafkaqueues/kafka-queue-operator/internal/verify"
)

// exitStatus is an error with its own exit status (kqctl verify: 1 for false claims, 3 for
// unverifiable claims with --strict).
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

// Exit statuses of kqctl verify.
const (
	verifyExitFalse        = 1
	verifyExitUnverifiable = 3
)

type verifyOptions struct {
	allNamespaces bool
	receive       bool
	strict        bool
	noJoin        bool
	output        string
	bootstrap     []string
	kafkaTimeout  time.Duration
}

func newVerifyCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [-n NS | -A] [--receive] [--bootstrap-server NS/CLUSTER=host:port[,host:port]] [-o json] [--strict]",
		Short: "Check every status claim of KafkaClusters, ShareQueues and DeadLetterRoutes against Kafka now",
		Long: `Read every KafkaCluster, ShareQueue and DeadLetterRoute (in the kubeconfig's namespace, -n, or all
with -A) and compare each claim their status makes about Kafka with what Kafka holds now: broker
count and ids, cluster id, finalized features and share.version, the share-state topic, each
queue's topic (exists, id, partitions, replication factor), the group configs a queue says are
set (and not set), dead-letter topics and the group configs of each route's mode, and that a
Ready queue's share group can be joined (a member joins and leaves without fetching; with
--receive it also fetches once and releases what it got, which costs those records one
delivery attempt). A False or Unknown condition claims nothing; members, lag and depth are not
checked. See docs/verify.md.

Kafka is reached as the operator does (bootstrap servers, TLS and SASL from the KafkaCluster and
its Secrets, read with your rights); --bootstrap-server NS/NAME=host:port[,host:port] replaces a
cluster's bootstrap servers, for running outside the cluster network (repeatable).

Prints each false claim on one line, then "checked N objects, M claims: K false, U
unverifiable". Exits 1 when any claim is false, 0 when all hold; claims that could not be
compared (a cluster that did not answer) are listed but exit 0, or 3 with --strict; 2 for a
usage error.`,
		Example: "  " + name + " verify -n shop\n  " + name + " verify -A --receive -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cf, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "check objects in all namespaces")
	f.BoolVar(&o.receive, "receive", false, "also fetch once from each Ready queue and release what was fetched (costs those records one delivery attempt)")
	f.BoolVar(&o.noJoin, "no-join", false, "do not join Ready queues' share groups (their usability is not checked)")
	f.BoolVar(&o.strict, "strict", false, "exit 3 when some claims could not be compared (and none is false)")
	f.StringVarP(&o.output, "output", "o", "text", "output: text or json")
	f.StringArrayVar(&o.bootstrap, "bootstrap-server", nil, "NS/NAME=host:port[,host:port]: reach KafkaCluster NS/NAME at these servers instead of spec.bootstrapServers (repeatable)")
	f.DurationVar(&o.kafkaTimeout, "kafka-timeout", 10*time.Second, "bound of each Kafka request")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// parseBootstrap reads --bootstrap-server values: NS/NAME=host:port[,host:port].
func parseBootstrap(vals []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, v := range vals {
		key, servers, ok := strings.Cut(v, "=")
		ns, name, slash := strings.Cut(key, "/")
		if !ok || !slash || ns == "" || name == "" || servers == "" {
			return nil, usageError{fmt.Sprintf("--bootstrap-server %q: want NAMESPACE/NAME=host:port[,host:port]", v)}
		}
		for _, s := range strings.Split(servers, ",") {
			if _, port, ok := strings.Cut(s, ":"); !ok || port == "" {
				return nil, usageError{fmt.Sprintf("--bootstrap-server %q: %q is not host:port", v, s)}
			}
			out[key] = append(out[key], s)
		}
	}
	return out, nil
}

func (o *verifyOptions) run(ctx context.Context, cf *genericclioptions.ConfigFlags, stdout io.Writer) error {
	if o.output != "text" && o.output != "json" {
		return usageError{fmt.Sprintf("-o %q: want text or json", o.output)}
	}
	bs, err := parseBootstrap(o.bootstrap)
	if err != nil {
		return err
	}
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	if o.allNamespaces {
		ns = ""
	}
	if ctx == nil {
		ctx = context.Background()
	}
	rep, err := verify.Check(ctx, c, verify.Options{Namespace: ns, Receive: o.receive, Timeout: o.kafkaTimeout, Bootstrap: bs, SkipJoin: o.noJoin})
	if err != nil {
		return err
	}
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		for _, f := range rep.Findings {
			fmt.Fprintf(stdout, "FALSE %s\n", f)
		}
		for _, u := range rep.Unverifiable {
			fmt.Fprintf(stdout, "UNVERIFIABLE %s\n", u)
		}
		fmt.Fprintln(stdout, rep.Summary())
	}
	switch {
	case len(rep.Findings) > 0:
		return exitStatus{verifyExitFalse, fmt.Sprintf("%d false claims", len(rep.Findings))}
	case o.strict && len(rep.Unverifiable) > 0:
		return exitStatus{verifyExitUnverifiable, fmt.Sprintf("%d claims could not be compared (--strict)", len(rep.Unverifiable))}
	}
	return nil
}
