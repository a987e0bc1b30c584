package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/component-base/configz"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
	"k8s.io/kubernetes/cmd/kube-scheduler/app/options"
	"sigs.k8s.io/yaml"
)

// SchedulerOptions configure StartScheduler.
type SchedulerOptions struct {
	// ConfigFile is a KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1).
	// Empty: the default configuration (one profile, default-scheduler).
	ConfigFile string
	// KubeconfigPath replaces clientConnection.kubeconfig of the config.
	KubeconfigPath string
	// WorkDir receives the patched copy of the config.
	WorkDir string
	// Registry adds out-of-tree plugins (app.WithPlugin(...)); optional.
	Registry []app.Option
}

// PatchSchedulerConfig reads a KubeSchedulerConfiguration (or nothing, when
// src is empty) and returns it with clientConnection.kubeconfig set to
// kubeconfig and leader election off. Everything else (profiles, extenders,
// pluginConfig, percentageOfNodesToScore, ...) is kept as written.
func PatchSchedulerConfig(src, kubeconfig string) ([]byte, error) {
	doc := map[string]any{}
	if src != "" {
		raw, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		if doc == nil {
			doc = map[string]any{}
		}
	}
	if _, ok := doc["apiVersion"]; !ok {
		doc["apiVersion"] = "kubescheduler.config.k8s.io/v1"
	}
	if _, ok := doc["kind"]; !ok {
		doc["kind"] = "KubeSchedulerConfiguration"
	}
	sub := func(key string) map[string]any {
		m, ok := doc[key].(map[string]any)
		if !ok {
			m = map[string]any{}
			doc[key] = m
		}
		return m
	}
	sub("clientConnection")["kubeconfig"] = kubeconfig
	// Leader election off: with it on, losing the lease calls os.Exit in app.Run.
	sub("leaderElection")["leaderElect"] = false
	return yaml.Marshal(doc)
}

// StartScheduler runs a real kube-scheduler in-process the way the
// kube-scheduler command does (app.Setup + app.Run with --config), with its
// own HTTPS endpoint disabled. It returns once informers are started; stop()
// cancels it and waits for app.Run to return.
func StartScheduler(ctx context.Context, so SchedulerOptions) (stop func(), err error) {
	patched, err := PatchSchedulerConfig(so.ConfigFile, so.KubeconfigPath)
	if err != nil {
		return nil, err
	}
	dir := so.WorkDir
	if dir == "" {
		dir = filepath.Dir(so.KubeconfigPath)
	}
	cfgFile := filepath.Join(dir, "kube-scheduler-config.yaml")
	if err := os.WriteFile(cfgFile, patched, 0o600); err != nil {
		return nil, err
	}

	opts := options.NewOptions()
	opts.ConfigFile = cfgFile
	// No secure serving (healthz/metrics): 0 disables it, and with it the
	// delegated authn/authz lookups.
	opts.SecureServing.BindPort = 0
	opts.SecureServing.Listener = nil

	ctx, cancel := context.WithCancel(ctx)
	cc, sched, err := app.Setup(ctx, opts, so.Registry...)
	if err != nil {
		cancel()
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Without leader election Run returns only when ctx is done.
		if err := app.Run(ctx, cc, sched); err != nil && ctx.Err() == nil {
			klog.ErrorS(err, "kube-scheduler exited")
		}
	}()
	// Wait until app.Run has started the informers and they have synced
	// (the scheduler registered both informers in scheduler.New).
	podsSynced := cc.InformerFactory.Core().V1().Pods().Informer().HasSynced
	nodesSynced := cc.InformerFactory.Core().V1().Nodes().Informer().HasSynced
	deadline := time.Now().Add(60 * time.Second)
	for !(podsSynced() && nodesSynced()) {
		if time.Now().After(deadline) {
			cancel()
			<-done
			return nil, fmt.Errorf("kube-scheduler informers did not sync within 60s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	return func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			klog.Warning("harness: kube-scheduler did not stop within 30s")
		}
		// app.Run registers the global "componentconfig" configz; allow a restart.
		configz.Delete("componentconfig")
	}, nil
}
