// Package image builds container image tarballs without Docker and without a registry, for
// the test rig's kubelet node: its containerd loads them with
//
//	ctr -n k8s.io images import FILE.tar
//
// Three images are described here:
//
//   - OperatorSpec: what the Dockerfile's final stage ships — /manager, /kqctl and
//     /republisher, static Go binaries built with the Dockerfile's own command
//     (CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w"), USER 65532:65532,
//     ENTRYPOINT ["/manager"], WORKDIR / — on top of the few files of its base image
//     (gcr.io/distroless/static:nonroot) that the binaries rely on. dockerfile_test.go
//     parses the Dockerfile and fails when the two drift apart.
//   - PauseSpec: a pod sandbox image like registry.k8s.io/pause: /pause (test/image/pause),
//     USER 65535:65535, nothing else.
//   - AppSpec: the queue test application (test/image/queueapp), which receives from the
//     republisher sidecar in its Pod and writes what it accepted to a ledger topic.
//
// # The distroless base, and what is copied from it
//
// gcr.io/distroless/static:nonroot (built by GoogleContainerTools/distroless with
// rules_distroless) is a Debian root file system without a libc or a shell. It holds:
//
//   - /etc/passwd: root (0, home /root), nobody (65534, home /nonexistent) and nonroot
//     (65532, home /home/nonroot), all with shell /sbin/nologin.
//   - /etc/group: root (0), nobody (65534), tty (5), staff (50), nonroot (65532).
//   - /root (0700, root), /home (0755, root), /home/nonroot (0700, 65532:65532).
//   - /tmp (1777, root).
//   - /etc/ssl/certs/ca-certificates.crt, Debian's ca-certificates bundle.
//   - /etc/nsswitch.conf (hosts: files dns), /etc/os-release.
//   - the files of the Debian packages base-files, netbase (/etc/services, /etc/protocols,
//     /etc/rpc, /etc/ethertypes), tzdata (/usr/share/zoneinfo) and media-types
//     (/etc/mime.types), with their /usr/share/doc and /var/lib/dpkg/status.d entries.
//   - config: Env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin and
//     SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt; User 65532, WorkingDir
//     /home/nonroot (the Dockerfile overrides both).
//
// What the binaries rely on, and so what NonrootBase and CACertificates put in the images:
// /etc/passwd and /etc/group with the same root, nobody and nonroot entries (the runtime
// sets HOME from passwd: /home/nonroot for 65532, where kqctl looks for a kubeconfig),
// /home and /home/nonroot with the same owners and modes, /tmp 1777 (the manager's default
// --webhook-cert-dir is under os.TempDir()), the CA bundle (the Kafka client falls back to
// the system roots when a KafkaCluster configures TLS without a CA; it is copied from this
// host's HostCACertificates, not from Debian's package, so its contents are this host's),
// and both environment variables.
//
// What is left out: /root, /etc/nsswitch.conf (Go's resolver reads it only to order
// files and DNS, and without it uses files then DNS, which is what the file says),
// /etc/os-release, netbase (Go has built-in ports for the service names it resolves),
// tzdata (no binary loads a time zone by name), media-types, and the package metadata and
// licences. The kubelet provides /etc/hosts, /etc/resolv.conf, /etc/hostname, /dev and
// /proc at run time.
//
// Each image is one layer; its file times and the config's creation time are the Unix
// epoch, so the same binaries give the same image digest.
package image
