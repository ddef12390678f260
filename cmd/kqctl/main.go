// Command kqctl is the kafka-queue-operator user CLI (also usable as the kubectl plugin
// `kubectl kq` when installed as kubectl-kq):
//
//	kqctl import sqs -f attributes.json [--name N] [-n NS] [--cluster KC [--no-check]]
//	kqctl status [-n NS | -A] [-o table|yaml|json]
//	kqctl plan -f manifests.yaml [-n NS]
package main

import (
	"fmt"
	"os"
)

const usage = `kqctl: Kafka share-group queues on Kubernetes

Commands:
  import sqs   convert SQS queue attributes (get-queue-attributes JSON) to ShareQueue YAML
  status       show queues: effective delivery values, capacity, lag, members, DLQ route
  plan         show what the operator would change for the given manifests, applying nothing

Run 'kqctl <command> -h' for flags.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "import":
		if len(os.Args) < 3 || os.Args[2] != "sqs" {
			fmt.Fprintln(os.Stderr, "usage: kqctl import sqs -f attributes.json [flags]")
			os.Exit(2)
		}
		err = runImportSQS(os.Args[3:], os.Stdout, os.Stderr)
	case "status":
		err = runStatus(os.Args[2:], os.Stdout)
	case "plan":
		err = runPlan(os.Args[2:], os.Stdout)
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "kqctl: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kqctl:", err)
		os.Exit(1)
	}
}
