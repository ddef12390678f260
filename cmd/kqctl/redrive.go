package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kqv1 "github.com/kafkaqueues/kafka-queue-operator/api/v1alpha1"
	"github.com/kafkaqueues/kafka-queue-operator/controllers"
	"github.com/kafkaqueues/kafka-queue-operator/internal/republisher"
)

type redriveOptions struct {
	rate, maxRedrives int32
	reasons           []string
	partitions        []int32
	noWait            bool
	timeout           time.Duration
	poll              time.Duration
}

func newRedriveCmd(name string, cf *genericclioptions.ConfigFlags) *cobra.Command {
	o := &redriveOptions{poll: time.Second}
	cmd := &cobra.Command{
		Use:   "redrive ROUTE [-n NS] [--rate N] [--max-redrives N] [--reason R]... [--source-partition P]... [--no-wait]",
		Short: "Move a DeadLetterRoute's dead letters back to its queue (SQS StartMessageMoveTask)",
		Long: `Create a DeadLetterRedrive (generateName ROUTE-) for the DeadLetterRoute ROUTE and, unless
--no-wait, show its progress (moved/total) until it ends.

The operator moves the records present in the route's dead-letter topic when the redrive
starts back to the route's ShareQueue's topic, in Kafka transactions: each record is moved
exactly once for consumers reading with read_committed, even across a manager crash. Moved
records carry the headers kqo.redriven and kqo.redrive.count; a record already redriven
--max-redrives times is left in place (refused). --reason and --source-partition filter on
the provenance headers (kqo.reason; kqo.source.partition or __dlq.errors.partition).

Prints the redrive's name first. Exits 0 when it completes, 1 when it fails or is cancelled
(kubectl patch ... -p '{"spec":{"cancel":true}}'), 2 for a usage error.`,
		Example: "  " + name + " redrive orders-dlq -n shop --rate 100\n  " + name + " redrive orders-dlq --source-partition 0,1 --no-wait",
		Args:    exactArgs(1, "ROUTE"), // worded as purge and reset-offsets word it
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("rate") && o.rate < 1 {
				return usageError{fmt.Sprintf("--rate %d: want at least 1 record/s (spec.rateLimit)", o.rate)}
			}
			if cmd.Flags().Changed("max-redrives") && (o.maxRedrives < 1 || o.maxRedrives > 1000) {
				return usageError{fmt.Sprintf("--max-redrives %d: want 1 to 1000 (spec.maxRedrives)", o.maxRedrives)}
			}
			for _, r := range o.reasons {
				if !slices.Contains(redriveReasons, r) {
					return usageError{fmt.Sprintf("--reason %q: want one of %s (the kqo.reason values the republisher writes; the brokers' own dead letters carry none)",
						r, strings.Join(redriveReasons, ", "))}
				}
			}
			return o.run(cf, cmd, args[0])
		},
	}
	f := cmd.Flags()
	f.Int32Var(&o.rate, "rate", 0, "records per second moved at most (spec.rateLimit; default: no limit)")
	f.Int32Var(&o.maxRedrives, "max-redrives", 0, "refuse records already redriven this many times (spec.maxRedrives; default 3)")
	f.StringSliceVar(&o.reasons, "reason", nil, "move only records whose kqo.reason header is one of these: "+strings.Join(redriveReasons, ", ")+
		" (spec.filter.reasons; written by the republisher sidecar only, so on a BrokerNative route it selects nothing)")
	f.Int32SliceVar(&o.partitions, "source-partition", nil, "move only records dead-lettered from these partitions of the queue's topic (spec.filter.sourcePartitions)")
	f.Lookup("source-partition").DefValue = "" // not "(default [])" in --help: no filter
	f.BoolVar(&o.noWait, "no-wait", false, "create the DeadLetterRedrive and exit")
	f.DurationVar(&o.timeout, "timeout", 0, "give up waiting after this long (0: wait until it ends); the redrive goes on")
	return cmd
}

// redriveReasons are the kqo.reason values the republisher sidecar writes
// (internal/republisher), the only values spec.filter.reasons can match.
var redriveReasons = []string{republisher.ReasonRejected, republisher.ReasonReleasedLast,
	republisher.ReasonLeaseExpired, republisher.ReasonOverAttempted}

func (o *redriveOptions) run(cf *genericclioptions.ConfigFlags, cmd *cobra.Command, route string) error {
	stdout, stderr := cmd.OutOrStdout(), cmd.ErrOrStderr()
	c, ns, err := newClient(cf)
	if err != nil {
		return err
	}
	ctx := context.Background()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	var dlr kqv1.DeadLetterRoute
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: route}, &dlr); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("DeadLetterRoute %s/%s not found (kubectl get dlr -n %s lists the routes)", ns, route, ns)
		}
		return fmt.Errorf("DeadLetterRoute %s/%s: %w", ns, route, err)
	}
	dr := &kqv1.DeadLetterRedrive{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: route + "-"},
		Spec: kqv1.DeadLetterRedriveSpec{RouteRef: kqv1.RouteReference{Name: route}}}
	// A sharded install runs a redrive in the shard of its route (the manager's
	// --watch-label-selector): carry the route's shard label over.
	if v, ok := dlr.Labels[controllers.ShardLabel]; ok {
		dr.Labels = map[string]string{controllers.ShardLabel: v}
	}
	if o.rate > 0 {
		rate := o.rate
		dr.Spec.RateLimit = &rate
	}
	if o.maxRedrives > 0 {
		mr := o.maxRedrives
		dr.Spec.MaxRedrives = &mr
	}
	if len(o.reasons) > 0 || len(o.partitions) > 0 {
		dr.Spec.Filter = &kqv1.RedriveFilter{Reasons: o.reasons, SourcePartitions: o.partitions}
	}
	if err := c.Create(ctx, dr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "deadletterredrive.kafkaqueues.io/%s created\n", dr.Name)
	if o.noWait {
		return nil
	}
	bar := newProgressBar(stderr)
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dr), dr); err != nil {
			bar.done()
			return fmt.Errorf("waiting for DeadLetterRedrive %s: %w", dr.Name, err)
		}
		st := dr.Status
		bar.show(st)
		if st.Phase.Terminal() {
			bar.done()
			fmt.Fprintf(stdout, "%s: %s: %d of %d moved, %d filtered, %d refused\n", dr.Name, st.Phase, st.Moved, st.Total, st.Filtered, st.Refused)
			if cnd := meta.FindStatusCondition(st.Conditions, kqv1.ConditionRecordsRefused); cnd != nil && cnd.Status == metav1.ConditionTrue {
				fmt.Fprintln(stdout, cnd.Message)
			}
			switch st.Phase {
			case kqv1.RedriveComplete:
				return nil
			case kqv1.RedriveFailed:
				return fmt.Errorf("DeadLetterRedrive %s failed: %s", dr.Name, conditionMessage(st.Conditions, kqv1.ConditionFailed))
			default:
				return fmt.Errorf("DeadLetterRedrive %s was cancelled", dr.Name)
			}
		}
		select {
		case <-ctx.Done():
			bar.done()
			return fmt.Errorf("stopped waiting for DeadLetterRedrive %s after --timeout %s (it goes on; kubectl get dlrr %s -n %s)", dr.Name, o.timeout, dr.Name, ns)
		case <-time.After(o.poll):
		}
	}
}

func conditionMessage(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Message
	}
	return ""
}

// progressBar draws "[#####.....] moved/total" on a terminal (redrawn in place) or, when
// the output is not a terminal, prints a line each time the figures change.
type progressBar struct {
	w    io.Writer
	tty  bool
	last string
}

func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

// progressLine renders one status as a bar of 30 cells, the counts and the rate.
func progressLine(st kqv1.DeadLetterRedriveStatus) string {
	const width = 30
	phase := string(st.Phase)
	if phase == "" {
		phase = string(kqv1.RedrivePending)
	}
	filled := 0
	if st.Total > 0 {
		filled = int(int64(width) * (st.Moved + st.Filtered + st.Refused) / st.Total)
	}
	filled = min(max(filled, 0), width)
	return fmt.Sprintf("[%s%s] %d/%d moved, %d filtered, %d refused, %d records/s  %s",
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), st.Moved, st.Total, st.Filtered, st.Refused, st.RecordsPerSecond, phase)
}

func (b *progressBar) show(st kqv1.DeadLetterRedriveStatus) {
	line := progressLine(st)
	if line == b.last {
		return
	}
	b.last = line
	if b.tty {
		fmt.Fprintf(b.w, "\r\033[K%s", line)
		return
	}
	fmt.Fprintln(b.w, line)
}

func (b *progressBar) done() {
	if b.tty && b.last != "" {
		fmt.Fprintln(b.w)
	}
}
