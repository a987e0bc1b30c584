// Command waterline-e2e-cluster runs a real control plane in one process
// (embedded etcd, kube-apiserver, optionally kube-scheduler) for end-to-end
// tests, and offers small helper subcommands for test drivers.
//
//	waterline-e2e-cluster [run] --kubeconfig-out FILE [--scheduler-config CFG | --default-scheduler]
//	waterline-e2e-cluster nodes --kubeconfig FILE --count N [--cpu 8 --memory 32Gi --ip-prefix 127.0.1.]
//	waterline-e2e-cluster scheduler --kubeconfig FILE [--config CFG] [--metrics-addr HOST:PORT]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/harness"
)

func usage() {
	fmt.Fprint(os.Stderr, `usage:
  waterline-e2e-cluster [run] --kubeconfig-out FILE [flags]   start etcd + kube-apiserver (+ kube-scheduler)
  waterline-e2e-cluster nodes --kubeconfig FILE --count N [flags]   create fake Ready nodes
  waterline-e2e-cluster scheduler --kubeconfig FILE [--config CFG] [--metrics-addr HOST:PORT]
                                                       run only a kube-scheduler (Waterline plugin registered) against a running cluster
run "waterline-e2e-cluster <cmd> -h" for the flags of a command.
`)
}

func main() {
	args := os.Args[1:]
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCluster(args)
	case "nodes":
		err = runNodes(args)
	case "scheduler":
		err = runScheduler(args)
	case "help":
		usage()
	default:
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "waterline-e2e-cluster %s: %v\n", cmd, err)
		klog.Flush()
		os.Exit(1)
	}
}

type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	klog.InitFlags(fs) // --v, --vmodule, --logtostderr, ...
	return fs
}

func runCluster(args []string) error {
	fs := newFlagSet("run")
	kubeconfigOut := fs.String("kubeconfig-out", "", "write the admin kubeconfig here (required)")
	schedCfg := fs.String("scheduler-config", "", "start an in-process kube-scheduler with this KubeSchedulerConfiguration file")
	defaultSched := fs.Bool("default-scheduler", false, "start an in-process kube-scheduler with the default configuration (profile default-scheduler)")
	workDir := fs.String("work-dir", "", "directory for etcd data and generated files (default: a temp dir, removed on exit)")
	var apiFlags stringList
	fs.Var(&apiFlags, "apiserver-flag", "extra kube-apiserver flag, e.g. --apiserver-flag=--feature-gates=Foo=true (repeatable; replaces nothing: appended to the defaults)")
	_ = fs.Parse(args)
	if *kubeconfigOut == "" {
		fs.Usage()
		return fmt.Errorf("--kubeconfig-out is required")
	}
	if *schedCfg != "" && *defaultSched {
		return fmt.Errorf("--scheduler-config and --default-scheduler are exclusive")
	}
	if *schedCfg != "" {
		if _, err := os.Stat(*schedCfg); err != nil {
			return err
		}
	}

	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()

	tb := harness.NewProcessTB("waterline-e2e-cluster", os.Stderr)
	defer tb.RunCleanups()

	flags := append(append([]string{}, harness.DefaultAPIServerFlags...), apiFlags...)
	t0 := time.Now()
	c, err := harness.Start(ctx, tb, harness.Options{
		WorkDir:         *workDir,
		KubeconfigPath:  *kubeconfigOut,
		StartScheduler:  *schedCfg != "" || *defaultSched,
		SchedulerConfig: *schedCfg,
		APIServerFlags:  flags,
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "control plane up in %v\n", time.Since(t0).Round(time.Millisecond))
	fmt.Printf("KUBECONFIG=%s\n", c.KubeconfigPath)
	fmt.Printf("APISERVER=%s\n", c.Server)
	fmt.Println("READY")
	_ = os.Stdout.Sync()

	<-ctx.Done()
	stopSignals() // a second signal now kills the process the default way
	fmt.Fprintln(os.Stderr, "signal received, shutting down")
	done := make(chan struct{})
	go func() {
		c.Stop()
		tb.RunCleanups()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		return fmt.Errorf("shutdown took longer than 60s")
	}
	_ = os.Remove(*kubeconfigOut)
	fmt.Fprintln(os.Stderr, "stopped")
	return nil
}

func runNodes(args []string) error {
	fs := newFlagSet("nodes")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	spec := harness.NodeSpec{}
	fs.IntVar(&spec.Count, "count", 1, "number of nodes")
	fs.IntVar(&spec.Start, "start", 0, "index of the first node")
	fs.StringVar(&spec.NamePrefix, "name-prefix", "node-", "node name prefix (name = prefix + index)")
	fs.StringVar(&spec.CPU, "cpu", "8", "cpu capacity/allocatable")
	fs.StringVar(&spec.Memory, "memory", "32Gi", "memory capacity/allocatable")
	fs.StringVar(&spec.Pods, "pods", "110", "pods capacity/allocatable")
	fs.StringVar(&spec.IPPrefix, "ip-prefix", "", "InternalIP prefix, e.g. 127.0.1. (node i gets 127.0.1.<i+1>); empty: no InternalIP")
	labels := fs.String("labels", "", "extra labels k=v,k2=v2")
	fs.IntVar(&spec.Parallelism, "parallelism", 16, "concurrent API calls")
	_ = fs.Parse(args)
	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig (or KUBECONFIG) is required")
	}
	if *labels != "" {
		spec.Labels = map[string]string{}
		for _, kv := range strings.Split(*labels, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return fmt.Errorf("bad label %q", kv)
			}
			spec.Labels[k] = v
		}
	}
	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	t0 := time.Now()
	names, err := harness.CreateFakeNodes(ctx, cs, spec)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created/updated %d nodes in %v\n", len(names), time.Since(t0).Round(time.Millisecond))
	for _, n := range names {
		fmt.Println(n)
	}
	return nil
}

// runScheduler runs a kube-scheduler (in this process) against an existing
// cluster until SIGINT/SIGTERM: lets a driver start, stop or restart the
// scheduler independently of the control plane, e.g. in a process of its own
// pinned to one core (TestThroughput's WATERLINE_E2E_TP_PIN). The Waterline
// plugin is registered, as in the test suite's in-process scheduler; only a
// profile that enables it uses it. With --metrics-addr the process serves
// component-base's registry (kube-scheduler's and the plugin's metrics) on
// plain HTTP at /metrics.
func runScheduler(args []string) error {
	fs := newFlagSet("scheduler")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	config := fs.String("config", "", "KubeSchedulerConfiguration file (default: default configuration)")
	workDir := fs.String("work-dir", "", "directory for the patched config (default: a temp dir, removed on exit)")
	metricsAddr := fs.String("metrics-addr", "", "serve /metrics (kube-scheduler's and the plugin's) on this host:port; empty: none")
	_ = fs.Parse(args)
	if *kubeconfig == "" {
		return fmt.Errorf("--kubeconfig (or KUBECONFIG) is required")
	}
	if *metricsAddr != "" {
		ln, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", legacyregistry.Handler())
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
	}
	dir := *workDir
	if dir == "" {
		d, err := os.MkdirTemp("", "waterline-e2e-scheduler-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer cancel()
	stop, err := harness.StartScheduler(ctx, harness.SchedulerOptions{
		ConfigFile: *config, KubeconfigPath: *kubeconfig, WorkDir: dir,
		Registry: []app.Option{app.WithPlugin(waterline.Name, waterline.New)},
	})
	if err != nil {
		return err
	}
	fmt.Println("READY")
	<-ctx.Done()
	cancel()
	stop()
	fmt.Fprintln(os.Stderr, "stopped")
	return nil
}
