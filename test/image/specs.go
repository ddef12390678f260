package image

import (
	"io/fs"
	"path/filepath"
)

// Users of the images, numeric as in their configs.
const (
	// NonrootUID is distroless's nonroot user and group, the Dockerfile's USER 65532:65532.
	NonrootUID = 65532
	// NobodyUID is distroless's nobody user and group.
	NobodyUID = 65534
	// PauseUID is the user registry.k8s.io/pause runs as (USER 65535:65535).
	PauseUID = 65535
)

// DistrolessBase is the Dockerfile's final-stage base image, whose files NonrootBase and
// CACertificates stand in for.
const DistrolessBase = "gcr.io/distroless/static:nonroot"

// HostCACertificates is the host's CA bundle that CACertificates copies: Debian's path, the
// same as the image's.
const HostCACertificates = "/etc/ssl/certs/ca-certificates.crt"

// DistrolessEnv is the distroless base config's environment, which the operator image keeps.
var DistrolessEnv = []string{DefaultPath, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}

// NonrootBase returns distroless's users and directories, as the package doc lists them:
// /etc/passwd (root, nobody, nonroot) and /etc/group (root, nobody, tty, staff, nonroot),
// both root 0644; /home 0755 root; /home/nonroot 0700 65532:65532; /tmp 1777 root.
func NonrootBase() []File {
	return []File{
		Dir("/etc", 0o755, 0, 0),
		{Path: "/etc/passwd", Mode: 0o644, Content: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Content: []byte(
			"root:x:0:\n" +
				"nobody:x:65534:\n" +
				"tty:x:5:\n" +
				"staff:x:50:\n" +
				"nonroot:x:65532:\n")},
		Dir("/home", 0o755, 0, 0),
		Dir("/home/nonroot", 0o700, NonrootUID, NonrootUID),
		Dir("/tmp", fs.ModeSticky|0o777, 0, 0),
	}
}

// CACertificates returns /etc/ssl/certs/ca-certificates.crt (root 0644) with the bytes of
// HostCACertificates, read when the image is written, and its directories (root 0755).
func CACertificates() []File {
	return []File{
		Dir("/etc/ssl", 0o755, 0, 0),
		Dir("/etc/ssl/certs", 0o755, 0, 0),
		{Path: "/etc/ssl/certs/ca-certificates.crt", Mode: 0o644, SourcePath: HostCACertificates},
	}
}

// OperatorSpec is the Dockerfile's image: /manager, /kqctl and /republisher (root 0755, read
// from binDir/manager, binDir/kqctl and binDir/republisher as BuildBinaries writes them) on
// NonrootBase and CACertificates; User "65532:65532", Entrypoint ["/manager"], WorkingDir
// "/", Env DistrolessEnv.
func OperatorSpec(binDir string) Spec {
	files := append(NonrootBase(), CACertificates()...)
	for _, name := range []string{"manager", "kqctl", "republisher"} {
		files = append(files, File{Path: "/" + name, Mode: 0o755, SourcePath: filepath.Join(binDir, name)})
	}
	return Spec{
		Files:      files,
		User:       "65532:65532",
		Entrypoint: []string{"/manager"},
		WorkingDir: "/",
		Env:        append([]string(nil), DistrolessEnv...),
	}
}

// PauseSpec is a pod sandbox image shaped like registry.k8s.io/pause: only /pause (root
// 0755, from binDir/pause as BuildFixtures writes it), User "65535:65535", Entrypoint
// ["/pause"], WorkingDir "/".
func PauseSpec(binDir string) Spec {
	return Spec{
		Files:      []File{{Path: "/pause", Mode: 0o755, SourcePath: filepath.Join(binDir, "pause")}},
		User:       "65535:65535",
		Entrypoint: []string{"/pause"},
		WorkingDir: "/",
	}
}

// AppSpec is the queue test application's image: /queueapp (root 0755, from
// binDir/queueapp as BuildFixtures writes it) on NonrootBase; User "65532:65532",
// Entrypoint ["/queueapp"], WorkingDir "/". Its settings come from the Pod's environment
// (see test/image/queueapp).
func AppSpec(binDir string) Spec {
	return Spec{
		Files:      append(NonrootBase(), File{Path: "/queueapp", Mode: 0o755, SourcePath: filepath.Join(binDir, "queueapp")}),
		User:       "65532:65532",
		Entrypoint: []string{"/queueapp"},
		WorkingDir: "/",
	}
}
