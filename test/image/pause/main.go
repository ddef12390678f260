// Command pause is the test node's pod sandbox process (the /pause of image.PauseSpec, in
// the role of registry.k8s.io/pause): it holds the Pod's namespaces by doing nothing until
// SIGTERM or SIGINT, then exits 0. Unlike the real pause it does not reap zombies, which a
// Pod without a shared process namespace never hands it. It writes one line to stderr once
// its signal handler is in place ("pause: waiting for SIGTERM or SIGINT") and one when a
// signal ends it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	fmt.Fprintln(os.Stderr, "pause: waiting for SIGTERM or SIGINT")
	s := <-sig
	fmt.Fprintf(os.Stderr, "pause: %v, exiting\n", s)
}
