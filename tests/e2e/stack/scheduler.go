package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/harness"
)

// SchedulerSpec is the KubeSchedulerConfiguration of a run: one profile, SchedulerName,
// reaching waterline through the extender, the Waterline plugin, or not at all.
type SchedulerSpec struct {
	ExtenderURL       string // "" = no extender
	DisableScoring    bool   // disable every in-tree Score plugin in the profile
	PercentageToScore int    // 0 = adaptive default
	// ClientQPS: the scheduler's API client rate limit (qps = burst); 0 keeps
	// kube-scheduler's default of 50 qps / burst 100, which caps binds at ~50/s.
	ClientQPS int
	// Plugin: enable the Waterline framework plugin (plugin/waterline) in the
	// profile, talking to the scorer directly over gRPC (no extender).
	Plugin *PluginSpec
}

// PluginSpec: the Waterline plugin's args (plugin/README.md "Args").
type PluginSpec struct {
	Endpoint string // the scorer's gRPC host:port
	Timeout  string // per RPC; "" = 1s
	FailOpen bool
	Weight   int // score weight; 0 = 5, as plugin/config/scheduler-config.yaml
	// Unary: `session: false`, the unary RPCs only (Filter, Score, Reserve each waited for).
	Unary bool
}

// YAML is the configuration file.
func (s SchedulerSpec) YAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
	if s.PercentageToScore > 0 {
		fmt.Fprintf(&b, "percentageOfNodesToScore: %d\n", s.PercentageToScore)
	}
	if s.ClientQPS > 0 {
		fmt.Fprintf(&b, "clientConnection: {qps: %d, burst: %d}\n", s.ClientQPS, s.ClientQPS)
	}
	fmt.Fprintf(&b, "profiles:\n  - schedulerName: %s\n", SchedulerName)
	switch {
	case s.Plugin != nil:
		weight := s.Plugin.Weight
		if weight == 0 {
			weight = 5
		}
		// multiPoint: PreFilter/Filter, PreScore/Score, Reserve (as the shipped
		// plugin/config/scheduler-config.yaml).
		fmt.Fprintf(&b, "    plugins:\n      multiPoint:\n        enabled:\n          - {name: %s, weight: %d}\n", waterline.Name, weight)
		if s.DisableScoring {
			// `disabled: '*'` at score also drops every multiPoint plugin from
			// that extension point (the framework skips multiPoint expansion
			// there), so Waterline is enabled at score again by name: it ranks
			// alone, as the extender does on the extender path.
			fmt.Fprintf(&b, "      score:\n        disabled:\n          - name: '*'\n        enabled:\n          - {name: %s, weight: %d}\n", waterline.Name, weight)
		} else {
			// The shipped profile: request-based scoring off, the other in-tree scores on.
			b.WriteString("      score:\n        disabled:\n          - name: NodeResourcesFit\n          - name: NodeResourcesBalancedAllocation\n")
			b.WriteString("      preScore:\n        disabled:\n          - name: NodeResourcesFit\n          - name: NodeResourcesBalancedAllocation\n")
		}
		timeout := s.Plugin.Timeout
		if timeout == "" {
			timeout = "1s"
		}
		fmt.Fprintf(&b, "    pluginConfig:\n      - name: %s\n        args: {endpoint: %q, timeout: %s, failOpen: %t, session: %t}\n",
			waterline.Name, s.Plugin.Endpoint, timeout, s.Plugin.FailOpen, !s.Plugin.Unary)
	case s.DisableScoring:
		// NodeResourcesFit (LeastAllocated), BalancedAllocation, ImageLocality,
		// TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity
		// scoring off: the extender's ranking alone decides (docs/design.md#architecture).
		b.WriteString("    plugins:\n      score:\n        disabled:\n          - name: '*'\n")
	}
	if s.ExtenderURL != "" {
		b.WriteString(ExtenderYAML(s.ExtenderURL, ""))
	}
	return b.String()
}

// ExtenderYAML is the `extenders:` section for the waterline extender at url; a tlsConfig
// (a YAML flow mapping: caFile, certFile, keyFile, serverName) turns on HTTPS.
func ExtenderYAML(url, tlsConfig string) string {
	https := ""
	if tlsConfig != "" {
		https = "\n    tlsConfig: " + tlsConfig
	}
	return fmt.Sprintf(`extenders:
  - urlPrefix: %q
    filterVerb: filter
    prioritizeVerb: prioritize
    weight: 5
    nodeCacheCapable: true
    httpTimeout: 1s
    ignorable: true
    enableHTTPS: %t%s
`, url, tlsConfig != "", https)
}

// Path is how kube-scheduler reaches waterline.
type Path string

const (
	// ExtenderPath: stock kube-scheduler + waterline-extender (HTTP) -> scorer.
	ExtenderPath Path = "extender"
	// PluginPath: the Waterline plugin in kube-scheduler -> scorer (gRPC): one
	// Evaluate per cycle on its Session stream, Reserve/Unreserve in the cycle.
	PluginPath Path = "plugin"
)

// Paths are both ways, in the order the scenarios run them.
var Paths = []Path{ExtenderPath, PluginPath}

// SkipShort skips t under `go test -short`: it starts a control plane, Prometheus and
// the waterline binaries.
func SkipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("scenario: starts a control plane, Prometheus and the waterline binaries; skipped with -short")
	}
}

// EachPath runs scenario once per path as subtests (`-run 'TestX/plugin'` picks one).
// Subtests run one after the other, and each subtest's stack (control plane,
// Prometheus, binaries, scheduler) is torn down by its own cleanups before the next
// starts: one control plane per process at a time.
func EachPath(t *testing.T, scenario func(t *testing.T, path Path)) {
	SkipShort(t)
	for _, p := range Paths {
		t.Run(string(p), func(t *testing.T) { scenario(t, p) })
	}
}

// WaterlineScheduler is the scheduler profile of the scenarios: waterline decides the
// ranking alone (every in-tree Score plugin disabled), every node is scored. On the
// extender path the extender filters and prioritizes; on the plugin path the Waterline
// plugin (multiPoint, and again at score) does, with the extender's httpTimeout (1s) as
// its RPC timeout and failOpen like the extender's `ignorable`.
func (s *Stack) WaterlineScheduler(path Path) SchedulerSpec {
	if path == PluginPath {
		return SchedulerSpec{Plugin: &PluginSpec{Endpoint: s.Scorer.Addr, Timeout: "1s", FailOpen: true}, DisableScoring: true, PercentageToScore: 100}
	}
	return SchedulerSpec{ExtenderURL: s.Extender.ExtenderURL(), DisableScoring: true, PercentageToScore: 100}
}

// StartScheduler (re)starts the in-process kube-scheduler with spec.
func (s *Stack) StartScheduler(spec SchedulerSpec) {
	s.t.Helper()
	path := filepath.Join(s.t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(spec.YAML()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.StartSchedulerConfig(path)
}

// StartSchedulerConfig (re)starts the in-process kube-scheduler with the
// KubeSchedulerConfiguration file path; "" is kube-scheduler's default configuration
// (profile default-scheduler, no waterline). The Waterline plugin is registered in every
// run; only a profile that enables it uses it.
func (s *Stack) StartSchedulerConfig(path string) {
	s.t.Helper()
	s.StopScheduler()
	dir := s.t.TempDir()
	if path != "" {
		dir = filepath.Dir(path)
	}
	stop, err := harness.StartScheduler(s.ctx, harness.SchedulerOptions{
		ConfigFile: path, KubeconfigPath: s.Cluster.KubeconfigPath, WorkDir: dir,
		Registry: []app.Option{app.WithPlugin(waterline.Name, waterline.New)},
	})
	if err != nil {
		config, _ := os.ReadFile(path)
		s.t.Fatalf("kube-scheduler: %v\n%s", err, config)
	}
	s.stopSched = stop
}

// StopScheduler stops the in-process kube-scheduler, if one runs.
func (s *Stack) StopScheduler() {
	if s.stopSched != nil {
		s.stopSched()
		s.stopSched = nil
	}
}
