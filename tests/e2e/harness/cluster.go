// Package harness runs a real control plane in-process for end-to-end tests:
// embedded etcd, a real kube-apiserver (k8s.io/kubernetes/cmd/kube-apiserver/app/testing)
// and, optionally, a real kube-scheduler (k8s.io/kubernetes/cmd/kube-scheduler/app).
// Nothing runs pods: nodes are fake Node objects (see nodes.go).
package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	apiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
)

// DefaultAPIServerFlags are the extra kube-apiserver flags scheduler_perf uses:
// no ServiceAccount token controller runs, no node lifecycle controller removes
// the not-ready taint TaintNodesByCondition would add, and Priority would need
// PriorityClass objects.
var DefaultAPIServerFlags = []string{
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition,Priority",
}

// Options configure Start.
type Options struct {
	// WorkDir holds etcd data, the kubeconfig (unless KubeconfigPath is set)
	// and the scheduler's patched config. Empty: a temp dir, removed by Stop.
	WorkDir string
	// KubeconfigPath is where the admin kubeconfig is written.
	// Empty: <WorkDir>/kubeconfig.
	KubeconfigPath string
	// StartScheduler starts an in-process kube-scheduler.
	StartScheduler bool
	// SchedulerConfig is a KubeSchedulerConfiguration file (YAML). Empty with
	// StartScheduler: the default configuration (profile default-scheduler).
	SchedulerConfig string
	// APIServerFlags replace DefaultAPIServerFlags when non-nil.
	APIServerFlags []string
}

// Cluster is a running control plane.
type Cluster struct {
	// RestConfig reaches the apiserver as a cluster admin (loopback token).
	RestConfig *restclient.Config
	Client     kubernetes.Interface
	// KubeconfigPath is the kubeconfig file usable by other processes.
	KubeconfigPath string
	// Server is the apiserver URL, https://127.0.0.1:PORT.
	Server string
	// EtcdURL is the embedded etcd's client URL.
	EtcdURL string
	// WorkDir is the working directory (etcd data etc.).
	WorkDir string

	tb          ktesting.TB
	ownWorkDir  bool
	etcd        *embed.Etcd
	apiTearDown func()
	schedStop   func()
	stopOnce    sync.Once
}

// Start brings up etcd, kube-apiserver and optionally kube-scheduler.
// tb is a *testing.T in tests, or a *ProcessTB in a binary.
// On error everything started so far is stopped.
func Start(ctx context.Context, tb ktesting.TB, opts Options) (c *Cluster, err error) {
	c = &Cluster{tb: tb}
	defer func() {
		// ProcessTB.Fatal panics with fatalError; turn it into an error.
		if r := recover(); r != nil {
			fe, ok := r.(fatalError)
			if !ok {
				panic(r)
			}
			err = fe
		}
		if err != nil {
			c.Stop()
			c = nil
		}
	}()

	if opts.WorkDir == "" {
		dir, derr := os.MkdirTemp("", "waterline-e2e-")
		if derr != nil {
			return c, derr
		}
		opts.WorkDir = dir
		c.ownWorkDir = true
	} else if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return c, err
	}
	c.WorkDir = opts.WorkDir
	if opts.KubeconfigPath == "" {
		opts.KubeconfigPath = filepath.Join(opts.WorkDir, "kubeconfig")
	}

	t0 := time.Now()
	if err := c.startEtcd(filepath.Join(opts.WorkDir, "etcd")); err != nil {
		return c, fmt.Errorf("etcd: %w", err)
	}
	tb.Logf("harness: etcd ready at %s (%v)", c.EtcdURL, time.Since(t0).Round(time.Millisecond))

	t1 := time.Now()
	if err := c.startAPIServer(opts); err != nil {
		return c, fmt.Errorf("kube-apiserver: %w", err)
	}
	tb.Logf("harness: kube-apiserver ready at %s (%v)", c.Server, time.Since(t1).Round(time.Millisecond))

	if err := c.writeKubeconfig(ctx, opts.KubeconfigPath); err != nil {
		return c, fmt.Errorf("kubeconfig: %w", err)
	}
	c.KubeconfigPath = opts.KubeconfigPath

	if opts.StartScheduler {
		t2 := time.Now()
		stop, err := StartScheduler(ctx, SchedulerOptions{
			ConfigFile:     opts.SchedulerConfig,
			KubeconfigPath: c.KubeconfigPath,
			WorkDir:        opts.WorkDir,
		})
		if err != nil {
			return c, fmt.Errorf("kube-scheduler: %w", err)
		}
		c.schedStop = stop
		tb.Logf("harness: kube-scheduler running (%v)", time.Since(t2).Round(time.Millisecond))
	}
	return c, nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) startEtcd(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	var lastErr error
	// The ports are picked before etcd binds them; retry on a lost race.
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		cfg := embed.NewConfig()
		cfg.Name = "waterline-e2e"
		cfg.Dir = dir
		cfg.UnsafeNoFsync = true // throw-away single member
		cfg.LogLevel = "error"
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		cfg.ListenClientUrls = []url.URL{clientURL}
		cfg.AdvertiseClientUrls = []url.URL{clientURL}
		cfg.ListenPeerUrls = []url.URL{peerURL}
		cfg.AdvertisePeerUrls = []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			_ = os.RemoveAll(dir)
			_ = os.MkdirAll(dir, 0o700)
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			e.Close()
			return errors.New("etcd took too long to start")
		}
		c.etcd = e
		c.EtcdURL = clientURL.String()
		return nil
	}
	return lastErr
}

func (c *Cluster) startAPIServer(opts Options) error {
	sc := storagebackend.NewDefaultConfig(path.Join("/", uuid.New().String(), "registry"), nil)
	sc.Transport.ServerList = []string{c.EtcdURL}

	flags := opts.APIServerFlags
	if flags == nil {
		flags = DefaultAPIServerFlags
	}
	instance := apiservertesting.NewDefaultTestServerOptions()
	// The invariant check scrapes metrics at teardown and reports through tb.Errorf.
	instance.DisableInvariantChecks = true
	instance.RequestTimeout = 10 * time.Minute

	server, err := apiservertesting.StartTestServer(c.tb, instance, flags, sc)
	if err != nil {
		return err
	}
	c.apiTearDown = server.TearDownFn

	cfg := restclient.CopyConfig(server.ClientConfig)
	cfg.QPS = 5000
	cfg.Burst = 5000
	c.RestConfig = cfg
	c.Server = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(server.ServerOpts.SecureServing.BindPort))
	c.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// Stop stops the scheduler, the apiserver and etcd and removes the work dir
// if Start created it. Safe to call more than once.
func (c *Cluster) Stop() {
	if c == nil {
		return
	}
	c.stopOnce.Do(func() {
		if c.schedStop != nil {
			klog.Info("harness: stopping kube-scheduler")
			c.schedStop()
		}
		if c.apiTearDown != nil {
			klog.Info("harness: stopping kube-apiserver")
			c.apiTearDown()
		}
		if c.etcd != nil {
			klog.Info("harness: stopping etcd")
			c.etcd.Close()
		}
		if c.ownWorkDir && c.WorkDir != "" {
			_ = os.RemoveAll(c.WorkDir)
		}
	})
}
