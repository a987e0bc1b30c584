package harness

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
)

// ContextName is the cluster, user and context name in the written kubeconfig.
const ContextName = "waterline-e2e"

// servingCA returns the PEM of the CA that signed the apiserver's default
// serving certificate (the last certificate of the chain it presents; the
// test server generates a leaf + self-signed CA pair).
func servingCA(server string) ([]byte, error) {
	u, err := url.Parse(server)
	if err != nil {
		return nil, err
	}
	conn, err := tls.Dial("tcp", u.Host, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only to read the chain; verified afterwards
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	chain := conn.ConnectionState().PeerCertificates
	if len(chain) == 0 {
		return nil, errors.New("no certificate presented")
	}
	ca := chain[len(chain)-1]
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Raw}), nil
}

// writeKubeconfig writes an admin kubeconfig for other processes: https to
// 127.0.0.1 with the serving CA embedded, and the apiserver's loopback bearer
// token (member of system:masters). It then checks the file by reading it
// back and calling /version; if CA verification fails it falls back to
// insecure-skip-tls-verify and logs a warning.
func (c *Cluster) writeKubeconfig(ctx context.Context, file string) error {
	if c.RestConfig.BearerToken == "" {
		return errors.New("apiserver loopback config has no bearer token")
	}
	caPEM, caErr := servingCA(c.Server)
	if caErr != nil {
		klog.Warningf("harness: reading serving CA: %v; using insecure-skip-tls-verify", caErr)
	}
	write := func(insecure bool) error {
		cfg := clientcmdapi.NewConfig()
		cluster := clientcmdapi.NewCluster()
		cluster.Server = c.Server
		if insecure {
			cluster.InsecureSkipTLSVerify = true
		} else {
			cluster.CertificateAuthorityData = caPEM
		}
		auth := clientcmdapi.NewAuthInfo()
		auth.Token = c.RestConfig.BearerToken
		kctx := clientcmdapi.NewContext()
		kctx.Cluster = ContextName
		kctx.AuthInfo = ContextName
		kctx.Namespace = "default"
		cfg.Clusters[ContextName] = cluster
		cfg.AuthInfos[ContextName] = auth
		cfg.Contexts[ContextName] = kctx
		cfg.CurrentContext = ContextName
		if dir := filepath.Dir(file); dir != "" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
		}
		// Write to a temp file and rename, so readers never see a partial file.
		tmp := file + ".tmp"
		if err := clientcmd.WriteToFile(*cfg, tmp); err != nil {
			return err
		}
		if err := os.Chmod(tmp, 0o600); err != nil {
			return err
		}
		return os.Rename(tmp, file)
	}
	check := func() error {
		rc, err := clientcmd.BuildConfigFromFlags("", file)
		if err != nil {
			return err
		}
		rc.Timeout = 10 * time.Second
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return err
		}
		_, err = cs.Discovery().ServerVersion()
		return err
	}

	if caErr == nil {
		if err := write(false); err != nil {
			return err
		}
		err := check()
		if err == nil {
			return nil
		}
		klog.Warningf("harness: kubeconfig with embedded CA failed (%v); using insecure-skip-tls-verify", err)
	}
	if err := write(true); err != nil {
		return err
	}
	if err := check(); err != nil {
		return fmt.Errorf("written kubeconfig %s does not work: %w", file, err)
	}
	return nil
}
