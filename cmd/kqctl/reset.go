package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
)

// resetOptions are the flags of purge and reset-offsets.
type resetOptions struct {
	toEarliest, toLatest bool
	toDatetime           string
	byDuration           string
	whenMembersPresent   string
	wait, noWait         bool
	timeout              time.Duration
	// poll is how often the OffsetReset is read while waiting.
	poll time.Duration
}

func (o *resetOptions) addWaitFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.whenMembersPresent, "when-members-present", "Wait", "while the share group has members: Wait (until it is empty) or Fail (Kafka resets only an empty group)")
	f.BoolVar(&o.wait, "wait", true, "wait for the reset to complete or fail, showing progress on stderr")
	f.BoolVar(&o.noWait, "no-wait", false, "create the OffsetReset and return at once (same as --wait=false)")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long --wait waits (0: no bound); the OffsetReset stays and keeps going after a timeout")
	_ = cmd.RegisterFlagCompletionFunc("when-members-present", cobra.FixedCompletions([]string{"Wait", "Fail"}, cobra.ShellCompDirectiveNoFileComp))
}

func newPurgeCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &resetOptions{}
	cmd := &cobra.Command{
		Use:   "purge QUEUE [-n NS] [--no-wait] [--timeout 5m] [--when-members-present Wait|Fail]",
		Short: "Skip every record in a queue now (SQS PurgeQueue): reset its share group to the latest offsets",
		Long: `Create an OffsetReset (toLatest) for the ShareQueue QUEUE: every record in its topic now is skipped;
records produced after the reset is resolved are delivered. Kafka moves a share group's start
offsets only while the group has no members, so by default the reset waits until the
consumers have stopped (--when-members-present Fail ends it instead).

Unless --no-wait, kqctl waits for the outcome, printing progress on stderr and each
partition's offsets before, target and after on stdout. Exits 1 when the reset failed or
--timeout passed.`,
		Example: "  " + name + " purge orders -n shop",
		Args:    exactArgs(1, "QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.toLatest = true
			return o.run(cf, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	o.addWaitFlags(cmd)
	return cmd
}

func newResetOffsetsCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &resetOptions{}
	cmd := &cobra.Command{
		Use:   "reset-offsets QUEUE (--to-earliest | --to-latest | --to-datetime T | --by-duration D) [-n NS] [--no-wait]",
		Short: "Move a queue's share-group start offsets (replay from the start, from a time, or skip to the end)",
		Long: `Create an OffsetReset for the ShareQueue QUEUE, with the target named as Kafka's
kafka-share-groups.sh --reset-offsets names it:

  --to-earliest       every retained record is delivered again
  --to-latest         every record present now is skipped (as purge)
  --to-datetime T     records with a timestamp at or after T (RFC 3339, e.g. 2026-12-01T09:00:00Z)
  --by-duration D     records of the last D (Go duration, e.g. 90m, 2h)

The targets are resolved once to absolute per-partition offsets and recorded in the
OffsetReset's status before they are applied, so the reset is applied exactly once. Kafka
moves a share group's start offsets only while the group has no members: by default the reset
waits until the consumers have stopped (--when-members-present Fail ends it instead).

Unless --no-wait, kqctl waits for the outcome, printing progress on stderr and each
partition's offsets on stdout. Exits 1 when the reset failed or --timeout passed.`,
		Example: "  " + name + " reset-offsets orders -n shop --to-datetime 2026-12-01T09:00:00Z\n  " + name + " reset-offsets orders -n shop --by-duration 2h",
		Args:    exactArgs(1, "QUEUE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cf, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.toEarliest, "to-earliest", false, "reset to the earliest offsets (redeliver every retained record)")
	f.BoolVar(&o.toLatest, "to-latest", false, "reset to the latest offsets (skip every record present now)")
	f.StringVar(&o.toDatetime, "to-datetime", "", "reset to the first record at or after this time (RFC 3339)")
	f.StringVar(&o.byDuration, "by-duration", "", "reset to the first record of the last D (Go duration, e.g. 90m)")
	o.addWaitFlags(cmd)
	return cmd
}

// exactArgs wants n positional arguments, a usage error (exit 2) otherwise.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError{fmt.Sprintf("%s takes %s (got %d argument(s)); usage: %s", cmd.CommandPath(), what, len(args), cmd.UseLine())}
		}
		return nil
	}
}

// spec builds the OffsetReset spec from the flags; a bad value is a usage error naming the
// flag and the value.
func (o *resetOptions) spec(queue string) (kqv1.OffsetResetSpec, error) {
	yes := true
	s := kqv1.OffsetResetSpec{QueueRef: kqv1.QueueReference{Name: queue}, WhenMembersPresent: kqv1.MembersPolicy(o.whenMembersPresent)}
	switch s.WhenMembersPresent {
	case kqv1.MembersPolicyWait, kqv1.MembersPolicyFail:
	default:
		return s, usageError{fmt.Sprintf("--when-members-present %q: want Wait or Fail", o.whenMembersPresent)}
	}
	set := 0
	for _, b := range []bool{o.toEarliest, o.toLatest, o.toDatetime != "", o.byDuration != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return s, usageError{fmt.Sprintf("exactly one of --to-earliest, --to-latest, --to-datetime, --by-duration is needed (%d given)", set)}
	}
	switch {
	case o.toEarliest:
		s.ToEarliest = &yes
	case o.toLatest:
		s.ToLatest = &yes
	case o.toDatetime != "":
		t, err := time.Parse(time.RFC3339, o.toDatetime)
		if err != nil {
			return s, usageError{fmt.Sprintf("--to-datetime %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z: %v", o.toDatetime, err)}
		}
		s.ToDatetime = &metav1.Time{Time: t}
	case o.byDuration != "":
		d, err := time.ParseDuration(o.byDuration)
		if err != nil || d <= 0 {
			return s, usageError{fmt.Sprintf("--by-duration %q: want a Go duration above 0 such as 90m or 2h", o.byDuration)}
		}
		s.ByDuration = &metav1.Duration{Duration: d}
	}
	return s, nil
}

func (o *resetOptions) run(cf *genericclioptions.ConfigFlags, queue string, stdout, stderr io.Writer) error {
	spec, err := o.spec(queue)
	if err != nil {
		return err
	}
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var sq kqv1.ShareQueue
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: queue}, &sq); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ShareQueue %s/%s not found (kubectl get sq -n %s lists the queues)", ns, queue, ns)
		}
		return fmt.Errorf("reading ShareQueue %s/%s: %w", ns, queue, err)
	}
	or := &kqv1.OffsetReset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: queue + "-"}, Spec: spec}
	// A sharded install resets a queue in the shard of the queue (the manager's
	// --watch-label-selector): carry the queue's shard label over.
	if v, ok := sq.Labels[controllers.ShardLabel]; ok {
		or.Labels = map[string]string{controllers.ShardLabel: v}
	}
	if err := c.Create(ctx, or); err != nil {
		return fmt.Errorf("creating the OffsetReset: %w", err)
	}
	fmt.Fprintf(stdout, "offsetreset.kafkaqueues.io/%s created (%s on ShareQueue %s/%s)\n", or.Name, spec.TargetString(), ns, queue)
	if !o.wait || o.noWait {
		return nil
	}
	return o.waitFor(ctx, c, or, stdout, stderr)
}

// waitFor polls the OffsetReset until it is finished or the timeout passes, printing each new
// phase, reason and per-partition progress on stderr once.
func (o *resetOptions) waitFor(ctx context.Context, c client.Client, or *kqv1.OffsetReset, stdout, stderr io.Writer) error {
	poll := o.poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	last := ""
	for {
		err := c.Get(ctx, client.ObjectKeyFromObject(or), or)
		if err == nil {
			if line := resetProgress(or); line != last {
				fmt.Fprintln(stderr, line)
				last = line
			}
			if or.Status.Finished() {
				printResetPartitions(stdout, or)
				if c := meta.FindStatusCondition(or.Status.Conditions, kqv1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
					return fmt.Errorf("OffsetReset %s/%s failed (%s): %s", or.Namespace, or.Name, c.Reason, c.Message)
				}
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("timed out after %v waiting for OffsetReset %s/%s (phase %s); it stays and goes on: kubectl get offsetreset %s -n %s", o.timeout, or.Namespace, or.Name, dash(string(or.Status.Phase)), or.Name, or.Namespace)
			}
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// resetProgress is one progress line: phase, partitions done (read back) of those resolved,
// and the Complete condition's reason and message.
func resetProgress(or *kqv1.OffsetReset) string {
	st := or.Status
	done := 0
	for _, p := range st.Partitions {
		if p.After != nil {
			done++
		}
	}
	phase := st.Phase
	if phase == "" {
		phase = kqv1.OffsetResetPending
	}
	line := fmt.Sprintf("%s: %s", or.Name, phase)
	if len(st.Partitions) > 0 {
		line += fmt.Sprintf(" [%s] %d/%d partitions", bar(done, len(st.Partitions), 20), done, len(st.Partitions))
	}
	if c := meta.FindStatusCondition(st.Conditions, kqv1.ConditionComplete); c != nil && c.Status != metav1.ConditionTrue {
		line += fmt.Sprintf(" — %s: %s", c.Reason, c.Message)
	}
	return line
}

// bar draws done/total as width characters.
func bar(done, total, width int) string {
	n := 0
	if total > 0 {
		n = done * width / total
	}
	return strings.Repeat("#", n) + strings.Repeat(".", width-n)
}

func printResetPartitions(stdout io.Writer, or *kqv1.OffsetReset) {
	if len(or.Status.Partitions) == 0 {
		return
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 3, ' ', 0)
	fmt.Fprintf(tw, "TOPIC\tPARTITION\tBEFORE\tTARGET\tAFTER\n")
	opt := func(v *int64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprint(*v)
	}
	for _, p := range or.Status.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\n", or.Status.Topic, p.Partition, opt(p.Before), p.Target, opt(p.After))
	}
	_ = tw.Flush()
}
