package rig

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// StartAPIServer starts a real kube-apiserver and etcd with the operator's CRDs installed.
func StartAPIServer() (*envtest.Environment, *rest.Config, error) {
	return StartAPIServerWithWebhooks(false)
}

// StartAPIServerWithWebhooks is StartAPIServer; with webhooks it also installs the operator's
// webhook configurations (config/webhook), pointed at a local port with a throwaway serving
// certificate: serve them on env.WebhookInstallOptions.LocalServingHost/Port with CertDir
// LocalServingCertDir.
func StartAPIServerWithWebhooks(webhooks bool) (*envtest.Environment, *rest.Config, error) {
	dir, err := EnvtestBinaries()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if webhooks {
		env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")}}
	}
	return startEnv(env, dir)
}

// startEnv starts env in one of the machine's start slots (acquireStartSlot).
func startEnv(env *envtest.Environment, dir string) (*envtest.Environment, *rest.Config, error) {
	isolateTemp()
	release := acquireStartSlot("kube-apiserver")
	defer release()
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting kube-apiserver/etcd from %s: %w", dir, err)
	}
	return env, cfg, nil
}

// StartBareAPIServer starts a real kube-apiserver and etcd with nothing installed: no CRDs,
// as a fresh cluster is before `helm install`.
func StartBareAPIServer() (*envtest.Environment, *rest.Config, error) {
	dir, err := EnvtestBinaries()
	if err != nil {
		return nil, nil, err
	}
	return startEnv(&envtest.Environment{BinaryAssetsDirectory: dir}, dir)
}

// Kubectl returns the path of the kubectl built beside kube-apiserver (same version).
func Kubectl() (string, error) {
	dir, err := EnvtestBinaries()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "kubectl"), nil
}

// WriteKubeconfig writes a kubeconfig for cfg to path (for kubectl and out-of-process runs).
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["rig"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["rig"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["rig"] = &clientcmdapi.Context{Cluster: "rig", AuthInfo: "rig"}
	kc.CurrentContext = "rig"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}
