package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kafkaqueues/kafka-queue-operator/internal/version"
)

// newVersionCmd prints kqctl's own version (the release it was built from, set at link time),
// as `kubectl version --client` does.
func newVersionCmd(name string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "version [-o text|json]",
		Short:   "Print this CLI's version (the release it was built from)",
		Example: "  " + name + " version\n  " + name + " version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := version.Get()
			switch output {
			case "", "text":
				fmt.Fprintln(cmd.OutOrStdout(), "kqctl", v)
			case "json":
				b, err := json.MarshalIndent(v, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			default:
				return usageError{fmt.Sprintf("-o %q: want text or json", output)}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "Output format: text or json.")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
