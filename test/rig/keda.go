package rig

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
)

// KEDAVersion is the KEDA release the external scaler is built and tested against: its proto
// generates internal/scaler/externalscaler (hack/gen-externalscaler.sh's KEDA_VERSION) and its
// CRDs check the docs' ScaledObjects.
const KEDAVersion = "v2.20.2"

// KEDACRDDir returns the directory of KEDA's CRDs (config/crd/bases) in KEDAVersion's module,
// downloaded from the Go module proxy into the module cache.
func KEDACRDDir() (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/kedacore/keda/v2@"+KEDAVersion)
	cmd.Dir = RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download github.com/kedacore/keda/v2@%s: %w", KEDAVersion, err)
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return "", fmt.Errorf("go mod download github.com/kedacore/keda/v2@%s: %v %s", KEDAVersion, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "config", "crd", "bases"), nil
}
