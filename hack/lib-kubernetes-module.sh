# Sourced by hack/build-envtest-bins.sh and hack/build-node-bins.sh: the one recipe both use
# to build Kubernetes binaries from the Go module proxy.

# kube_module_init MODULE VERSION: in the current (empty) directory, make a Go module named
# MODULE that requires k8s.io/kubernetes@VERSION. k8s.io/kubernetes requires its staging
# modules at v0.0.0 (replaced in its own repository); each is mapped to the published v0.X.Y
# that matches the release (v1.37.2 -> v0.37.2).
kube_module_init() {
  local module="$1" version="$2" modjson gomod
  go mod init "$module" >/dev/null 2>&1
  modjson="$(go mod download -json "k8s.io/kubernetes@${version}")"
  gomod="$(printf '%s' "$modjson" | sed -n 's/.*"GoMod": "\(.*\)",*/\1/p')"
  {
    echo "require k8s.io/kubernetes ${version}"
    grep -E '^\s*k8s\.io/[a-z0-9-]+ v0\.0\.0\s*$' "$gomod" | awk -v v="v0.${version#v1.}" '{print "replace " $1 " => " $1 " " v}' | sort -u
  } >> go.mod
}

# kube_ldflags VERSION: the version ldflags of k8s.io/component-base (what --version prints).
kube_ldflags() {
  local version="$1"
  echo "-X k8s.io/component-base/version.gitVersion=${version} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
}
