// Command kqctl is the kafka-queue-operator user CLI, also the kubectl plugin `kubectl kq`
// when installed as kubectl-kq (and kubectl_complete-kq for kubectl's shell completion):
//
//	kqctl import sqs -f attributes.json [--name N] [-n NS] [--kafka-cluster KC [--no-check]]
//	kqctl status [-n NS | -A] [-o table|yaml|json]
//	kqctl plan -f manifests.yaml [-n NS]
//	kqctl purge | reset-offsets QUEUE ..., kqctl redrive ROUTE ...
//	kqctl verify [-n NS | -A] [--receive] [--no-join] [--strict] [-o text|json]
//	kqctl completion bash|zsh|fish|powershell
//
// Every command takes kubectl's kubeconfig flags (--kubeconfig, --context, -n/--namespace,
// --as, --as-group, --cluster, --user, --request-timeout, ...).
package main

import (
	"fmt"
	"os"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

func main() {
	// controller-runtime's client logs through its global logger, which warns with a stack
	// trace on stderr when a run lasts 30s without one set; kqctl reports errors itself.
	ctrllog.SetLogger(logr.Discard())
	name := commandName(os.Args[0], os.Getenv)
	err := execute(name, argsFor(os.Args), os.Stdout, os.Stderr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(exitCode(err))
}
