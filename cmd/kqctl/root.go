package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
)

// Names under which the binary runs. kubectl finds a plugin by its file name (kubectl-kq →
// `kubectl kq`) and completes its arguments by running kubectl_complete-kq with them.
const (
	pluginBinary     = "kubectl-kq"
	completionBinary = "kubectl_complete-kq"
	pluginCommand    = "kubectl kq"
)

// commandName is how kqctl names itself in usage text: `kubectl kq` when kubectl started it
// as a plugin (argv[0] is kubectl-kq or kubectl_complete-kq, or kubectl's
// KUBECTL_PLUGINS_CALLER is set), otherwise `kqctl`.
func commandName(argv0 string, getenv func(string) string) string {
	switch strings.TrimSuffix(filepath.Base(argv0), ".exe") {
	case pluginBinary, completionBinary:
		return pluginCommand
	}
	if getenv("KUBECTL_PLUGINS_CALLER") != "" {
		return pluginCommand
	}
	return "kqctl"
}

// usageError is a command-line mistake (exit status 2, as before cobra).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode maps an error of execute to the process exit status.
func exitCode(err error) int {
	var u usageError
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return st.code
	case errors.As(err, &u), strings.HasPrefix(err.Error(), "unknown command "), strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"):
		return 2
	default:
		return 1
	}
}

// execute runs kqctl with args (without argv[0]) under the given display name.
func execute(name string, args []string, stdout, stderr io.Writer) error {
	root := newRootCmd(name, stdout, stderr)
	if err := singleDashLongFlag(root, args); err != nil {
		return err
	}
	root.SetArgs(args)
	return root.Execute()
}

// singleDashLongFlag refuses Go-flag-style long flags with one dash (-no-check, -kubeconfig),
// which kqctl took before cobra: pflag would read -no-check as -n o-check.
func singleDashLongFlag(root *cobra.Command, args []string) error {
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		return nil
	}
	for _, a := range args {
		if a == "--" {
			return nil
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		flag, _, _ := strings.Cut(a[1:], "=")
		if len(flag) < 2 {
			continue
		}
		if cmd.LocalFlags().Lookup(flag) != nil || cmd.InheritedFlags().Lookup(flag) != nil {
			return usageError{fmt.Sprintf("flag %s needs two dashes: --%s", a, a[1:])}
		}
	}
	return nil
}

// run is execute under the name `kqctl`, for tests and the run* entry points.
func run(args []string, stdout, stderr io.Writer) error {
	return execute("kqctl", args, stdout, stderr)
}

func newRootCmd(name string, stdout, stderr io.Writer) *cobra.Command {
	cf := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:   "kqctl",
		Short: "Kafka share-group queues on Kubernetes",
		Long: `Kafka share-group queues on Kubernetes.

The kafka-queue-operator user CLI; installed as kubectl-kq it is the kubectl plugin ` + "`kubectl kq`" + `.
The kubeconfig flags (--kubeconfig, --context, -n/--namespace, --as, ...) work as in kubectl.`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: name},
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			_ = cmd.Help()
			return usageError{"a command is required"}
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	cf.AddFlags(root.PersistentFlags())
	registerConfigFlagCompletions(root, cf)

	imp := &cobra.Command{
		Use:   "import",
		Short: "Convert another queue system's settings to ShareQueue YAML",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageError{"usage: " + cmd.CommandPath() + " sqs -f attributes.json [flags]"}
		},
	}
	imp.AddCommand(newImportSQSCmd(name, cf))
	root.AddCommand(imp, newStatusCmd(name, cf), newPlanCmd(name, cf), newPurgeCmd(name, cf), newResetOffsetsCmd(name, cf), newRedriveCmd(name, cf),
		newVerifyCmd(name, cf), newVersionCmd(name))
	return root
}

func newImportSQSCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "sqs -f attributes.json [--name N] [-n NS] [--kafka-cluster KC [--no-check]]",
		Short: "Convert SQS queue attributes (get-queue-attributes JSON) to ShareQueue YAML",
		Long: `Convert the output of ` + "`aws sqs get-queue-attributes --attribute-names All`" + ` into ShareQueue and
DeadLetterRoute YAML on stdout, mapping every attribute or saying on stderr why it cannot be.

-n sets the namespace of the generated resources. --kafka-cluster sets spec.clusterRef and checks
the result against that live KafkaCluster's bounds (in -n, or the kubeconfig's namespace);
--no-check only sets clusterRef. --cluster is a deprecated alias of --kafka-cluster here (in
kubectl, --cluster names a kubeconfig cluster).`,
		Example: "  " + name + " import sqs -f attributes.json --name orders -n shop --kafka-cluster kafka",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("cluster") {
				fmt.Fprintln(cmd.ErrOrStderr(), "Flag --cluster has been deprecated, use --kafka-cluster (in kubectl, --cluster names a kubeconfig cluster)")
				if !cmd.Flags().Changed("kafka-cluster") {
					o.kafkaCluster = o.deprecatedCluster
				}
			}
			return o.run(cf, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "filename", "f", "", "SQS attributes JSON (output of aws sqs get-queue-attributes --attribute-names All); - for stdin")
	f.StringVar(&o.name, "name", "", "ShareQueue name (default: from QueueArn)")
	f.StringVar(&o.kafkaCluster, "kafka-cluster", "", "KafkaCluster for spec.clusterRef (default kafka); when given, the result is checked against that live cluster's bounds (needs a kubeconfig)")
	f.BoolVar(&o.noCheck, "no-check", false, "with --kafka-cluster, only set clusterRef; do not contact the apiserver")
	// The old name shadows the kubeconfig --cluster flag on this command only.
	f.StringVar(&o.deprecatedCluster, "cluster", "", "deprecated: use --kafka-cluster")
	_ = f.MarkHidden("cluster")
	_ = cmd.MarkFlagFilename("filename", "json")
	_ = cmd.RegisterFlagCompletionFunc("kafka-cluster", completeKafkaClusters(cf))
	_ = cmd.RegisterFlagCompletionFunc("cluster", completeKafkaClusters(cf))
	return cmd
}

func newStatusCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "status [-n NS | -A] [-o table|yaml|json]",
		Short: "Show queues: effective delivery values, capacity, lag, members, DLQ route",
		Long: `Show each ShareQueue's readiness, effective lease and delivery attempts, capacity, share-group
state, members, lag and dead-letter route, in the kubeconfig's namespace, -n, or all (-A).`,
		Example: "  " + name + " status -n shop\n  " + name + " status -A -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cf, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list queues in all namespaces")
	cmd.Flags().StringVarP(&o.output, "output", "o", "table", "output: table, yaml or json")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "yaml", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func newPlanCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &planOptions{}
	cmd := &cobra.Command{
		Use:   "plan -f manifests.yaml [-n NS]",
		Short: "Show what the operator would change for the given manifests, applying nothing",
		Long: `Show what the operator would change for the KafkaClusters, ShareQueues and DeadLetterRoutes in
a manifest file (- reads stdin); nothing is applied and nothing is written to Kafka.

Every manifest goes through a server-side dry-run apply (field manager kqctl), so the
apiserver's own schema, unknown-field check, defaults and CEL rules decide what is valid; an
object in a namespace the file itself creates is checked in the kubeconfig's namespace. Then,
with the reconcilers' own plans against live Kafka: each KafkaCluster is probed (share.version,
bounds, the share-state topic), each ShareQueue is planned with the ownership checks the
operator makes (another queue, a dead-letter topic, a Strimzi KafkaTopic), and each
DeadLetterRoute after its queue's planned writes. Every planned Kafka write is sent to the
brokers with ValidateOnly, so a value they refuse is reported with their message.

plan acts with your rights, not the operator's: it reads the KafkaClusters' Secrets and lists
ShareQueues and DeadLetterRoutes (in the manifest's namespace only when you may not list them
in all, which it reports) and KafkaTopics as you, and an AWS_MSK_IAM cluster without a Secret
uses your own AWS environment. Secrets and KafkaTopics in the file count; new objects naming
the same topic, group or queue are resolved as the operator does when they are created
together (the first by namespace/name). --request-timeout bounds each manifest (default 60s,
0 for none); a KafkaCluster that cannot be reached fails once, and the rest of its manifests
fail at once.

Exits 1 when a manifest is refused by the apiserver or unreadable, cannot be planned, or has
a write the brokers refuse; 2 for a usage error. Manifests without a namespace get -n, or the
kubeconfig's namespace.`,
		Example: "  " + name + " plan -f manifests.yaml -n shop\n  " + name + " plan -f deploy/ -R\n  " + name + " plan -k overlays/prod\n  kustomize build overlays/prod | " + name + " plan -f -",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.stdin = cmd.InOrStdin()
			return o.run(cf, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	// kubectl's -f, -R and -k, read by cli-runtime's resource builder.
	cmd.Flags().StringSliceVarP(&o.files.Filenames, "filename", "f", nil, "manifest file, directory, URL or glob, - for stdin; repeatable (every manifest is checked by a server-side dry run; KafkaClusters, ShareQueues and DeadLetterRoutes are planned)")
	cmd.Flags().BoolVarP(&o.files.Recursive, "recursive", "R", false, "read the directories given with -f and their subdirectories")
	cmd.Flags().StringVarP(&o.files.Kustomize, "kustomize", "k", "", "a kustomization directory, built as kubectl apply -k builds it")
	_ = cmd.MarkFlagFilename("filename", "yaml", "yml", "json")
	_ = cmd.MarkFlagDirname("kustomize")
	return cmd
}

// completionClient builds a client from the flags given so far, for dynamic completion.
func completionClient(cf *genericclioptions.ConfigFlags) (client.Client, string, context.Context, context.CancelFunc, bool) {
	c, ns, err := newClient(cf)
	if err != nil {
		return nil, "", nil, nil, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	return c, ns, ctx, cancel, true
}

func completeKafkaClusters(cf *genericclioptions.ConfigFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, ns, ctx, cancel, ok := completionClient(cf)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer cancel()
		var list kqv1.KafkaClusterList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, kc := range list.Items {
			if strings.HasPrefix(kc.Name, toComplete) {
				names = append(names, kc.Name)
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// registerConfigFlagCompletions completes -n with the cluster's namespaces and --context,
// --cluster and --user with the kubeconfig's entries.
func registerConfigFlagCompletions(root *cobra.Command, cf *genericclioptions.ConfigFlags) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		c, _, ctx, cancel, ok := completionClient(cf)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		defer cancel()
		var list corev1.NamespaceList
		if err := c.List(ctx, &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []string
		for _, n := range list.Items {
			if strings.HasPrefix(n.Name, toComplete) {
				names = append(names, n.Name)
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	kubeconfigNames := func(kind string) cobra.CompletionFunc {
		return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			raw, err := cf.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []string
			add := func(n string) {
				if strings.HasPrefix(n, toComplete) {
					names = append(names, n)
				}
			}
			switch kind {
			case "context":
				for n := range raw.Contexts {
					add(n)
				}
			case "cluster":
				for n := range raw.Clusters {
					add(n)
				}
			case "user":
				for n := range raw.AuthInfos {
					add(n)
				}
			}
			sort.Strings(names)
			return names, cobra.ShellCompDirectiveNoFileComp
		}
	}
	for _, kind := range []string{"context", "cluster", "user"} {
		_ = root.RegisterFlagCompletionFunc(kind, kubeconfigNames(kind))
	}
	_ = root.MarkPersistentFlagFilename("kubeconfig")
}

// main's helper: the arguments cobra should see for this invocation.
func argsFor(argv []string) []string {
	args := argv[1:]
	if strings.TrimSuffix(filepath.Base(argv[0]), ".exe") == completionBinary {
		// kubectl runs kubectl_complete-kq with the words after `kubectl kq`, the last one
		// being the word to complete; cobra's hidden __complete command takes exactly that.
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	return args
}
