package e2e

// The waterline stack for the scenario tests: a control plane from harness/,
// fake nodes, the fake exporter, a real Prometheus, and the real Rust binaries
// (waterline-collector, waterline-scorer, waterline-extender) as child
// processes on free loopback ports; kube-scheduler in-process with a profile
// `waterline-scheduler` that calls the extender, or enables the Waterline
// framework plugin (plugin/waterline, registered with app.WithPlugin) that
// calls the scorer over gRPC.

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	wlv1 "github.com/waterline/waterline/plugin/gen/waterline/v1"
	"github.com/waterline/waterline/plugin/waterline"
	"github.com/waterline/waterline/tests/e2e/fakeexporter"
	"github.com/waterline/waterline/tests/e2e/harness"
)

const (
	schedulerName = "waterline-scheduler"
	spreadKey     = "waterline.io/spread-group"
)

// ipPrefix: 127.0.1.x for up to 250 nodes, 127.1.x.y above.
func ipPrefix(nodes int) string {
	if nodes > 250 {
		return "127.1."
	}
	return "127.0.1."
}

// repoRoot is /work/main (two levels above tests/e2e).
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// binDir: WATERLINE_BIN_DIR, else <repo>/target/debug.
func binDir() string {
	if d := os.Getenv("WATERLINE_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot(), "target", "debug")
}

func needBinary(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(binDir(), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found (%v): build the Rust binaries first (cargo build --workspace --bins) or set WATERLINE_BIN_DIR", p, err)
	}
	return p
}

var helpCache sync.Map

// binaryHasFlag reports whether `<bin> --help` mentions flag (e.g. "--kubeconfig").
func binaryHasFlag(t *testing.T, name, flag string) bool {
	t.Helper()
	key := name + " " + flag
	if v, ok := helpCache.Load(key); ok {
		return v.(bool)
	}
	out, _ := exec.Command(needBinary(t, name), "--help").CombinedOutput()
	has := regexp.MustCompile(regexp.QuoteMeta(flag) + `\b`).Match(out)
	helpCache.Store(key, has)
	return has
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// ---------------------------------------------------------------- processes

// proc is a child process with its output in a log file; killed at cleanup.
type proc struct {
	t       *testing.T
	name    string
	path    string
	args    []string
	logPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(t *testing.T, name, path string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, path: path, args: args, logPath: filepath.Join(t.TempDir(), name+".log")}
	if err := p.start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last output of %s (%s) ---\n%s", name, p.logPath, p.Tail(4000))
		}
	})
	return p
}

func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.path, strings.Join(p.args, " "))
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.Env = append(os.Environ(), "RUST_BACKTRACE=1", "NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost")
	// The child dies with the test process even if cleanups never run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.cmd, p.done = cmd, done
	return nil
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to wait for the exit; then SIGKILL.
func (p *proc) signal(sig syscall.Signal, wait time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
	}
}

// Stop: SIGTERM, then SIGKILL after 5 s.
func (p *proc) Stop() { p.signal(syscall.SIGTERM, 5*time.Second) }

// Kill: SIGKILL (a crash).
func (p *proc) Kill() { p.signal(syscall.SIGKILL, 5*time.Second) }

// Restart starts the process again with the same arguments (after Stop/Kill).
func (p *proc) Restart() {
	p.t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		p.t.Fatalf("restart %s: %v", p.name, err)
	}
}

func (p *proc) Tail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return "(no log)"
	}
	defer f.Close()
	st, _ := f.Stat()
	if st.Size() > n {
		_, _ = f.Seek(st.Size()-n, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// ---------------------------------------------------------------- waiting

func waitFor(ctx context.Context, timeout, every time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var lastErr error
	for {
		ok, err := cond()
		if ok && err == nil {
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			if lastErr != nil {
				return fmt.Errorf("timed out after %v waiting for %s: %w", timeout, what, lastErr)
			}
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
}

var httpc = &http.Client{Timeout: 3 * time.Second}

func httpOK(url string) (bool, error) {
	resp, err := httpc.Get(url)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return false, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return true, nil
}

// waitReady polls http://admin/ready; fails the test with the process log.
func waitReady(ctx context.Context, t *testing.T, p *proc, admin string, timeout time.Duration) {
	t.Helper()
	err := waitFor(ctx, timeout, 200*time.Millisecond, p.name+" /ready", func() (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("%s exited", p.name)
		}
		return httpOK("http://" + admin + "/ready")
	})
	if err != nil {
		t.Fatalf("%v\n--- %s log ---\n%s", err, p.name, p.Tail(4000))
	}
}

// ---------------------------------------------------------------- Prometheus

const prometheusBin = "/usr/bin/prometheus"

var intervalRe = regexp.MustCompile(`(?m)^(\s*(?:- )?)interval:\s*\S+`)

// startPrometheus runs the real Prometheus (1 s scrape and evaluation) with
// deploy/prometheus/rules.yml, every group's interval rewritten to 1s.
func startPrometheus(ctx context.Context, t *testing.T, scrapeConfigs string, scrapeInterval string) (*proc, string) {
	t.Helper()
	if _, err := os.Stat(prometheusBin); err != nil {
		t.Fatalf("%s missing: run scripts/deps/prometheus.sh", prometheusBin)
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "prometheus", "rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	rules = intervalRe.ReplaceAll(rules, []byte("${1}interval: 1s"))
	rulesPath := filepath.Join(dir, "rules.yml")
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %[1]s\n  scrape_timeout: %[1]s\n  evaluation_interval: 1s\nrule_files:\n  - '%[2]s'\nscrape_configs:\n%[3]s", scrapeInterval, rulesPath, scrapeConfigs)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	p := startProc(t, "prometheus", prometheusBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1d",
		"--log.level=warn")
	url := "http://" + addr
	if err := waitFor(ctx, 60*time.Second, 200*time.Millisecond, "prometheus /-/ready", func() (bool, error) {
		if !p.running() {
			return false, fmt.Errorf("prometheus exited")
		}
		return httpOK(url + "/-/ready")
	}); err != nil {
		t.Fatalf("%v\n%s", err, p.Tail(4000))
	}
	return p, url
}

// ---------------------------------------------------------------- policy

type metricSpec struct {
	Name, Resource, Query string
	FilterAbove           float64 // 0: none
	Weight                float64
}

var (
	cpuAvg5m = metricSpec{Name: "cpu_usage_avg_5m", Resource: "cpu", Query: "waterline:node_cpu_usage:avg5m", Weight: 0.5}
	memAvg5m = metricSpec{Name: "mem_usage_avg_5m", Resource: "memory", Query: "waterline:node_memory_usage:avg5m", Weight: 0.5}
)

type policySpec struct {
	Metrics      []metricSpec
	Curve        string // YAML flow mapping; default waterLevel 40
	Ledger       bool
	ScoreMapping string // round | rescale
	ExtraYAML    string
	// Raw: a whole policy file used as written (e.g. deploy/policy/policy.yaml); the
	// fields above are then ignored.
	Raw string
}

func (ps policySpec) YAML() string {
	if ps.Raw != "" {
		return ps.Raw
	}
	var b strings.Builder
	b.WriteString("metrics:\n")
	for _, m := range ps.Metrics {
		fmt.Fprintf(&b, "  - {name: %s, resource: %s, query: %q, period: 1s, weight: %g", m.Name, m.Resource, m.Query, m.Weight)
		if m.FilterAbove > 0 {
			fmt.Fprintf(&b, ", filterAbove: %g", m.FilterAbove)
		}
		b.WriteString("}\n")
	}
	curve := ps.Curve
	if curve == "" {
		curve = "{kind: waterLevel, target: 40}"
	}
	fmt.Fprintf(&b, "curve: %s\n", curve)
	fmt.Fprintf(&b, "stale: {filter: pass, score: 50}\n")
	fmt.Fprintf(&b, "ledger: {enabled: %t}\n", ps.Ledger)
	fmt.Fprintf(&b, "antiColocation: [{labelKey: %s}]\n", spreadKey)
	fmt.Fprintf(&b, "nodeMapping: {labels: [node, instance]}\n")
	sm := ps.ScoreMapping
	if sm == "" {
		sm = "round"
	}
	fmt.Fprintf(&b, "extender: {scoreMapping: %s}\n", sm)
	b.WriteString(ps.ExtraYAML)
	return b.String()
}

// ---------------------------------------------------------------- scheduler config

type schedSpec struct {
	ExtenderURL       string // "" = no extender
	DisableScoring    bool   // disable every in-tree Score plugin in the profile
	PercentageToScore int    // 0 = adaptive default
	// ClientQPS: the scheduler's API client rate limit (qps = burst); 0 keeps
	// kube-scheduler's default of 50 qps / burst 100, which caps binds at ~50/s.
	ClientQPS int
	// Plugin: enable the Waterline framework plugin (plugin/waterline) in the
	// profile, talking to the scorer directly over gRPC (no extender).
	Plugin *pluginSpec
}

// pluginSpec: the Waterline plugin's args (plugin/README.md "Args").
type pluginSpec struct {
	Endpoint string // the scorer's gRPC host:port
	Timeout  string // per RPC; "" = 1s
	FailOpen bool
	Weight   int // score weight; 0 = 5, as plugin/config/scheduler-config.yaml
	// Unary: `session: false`, the unary RPCs only (Filter, Score, Reserve each waited for).
	Unary bool
}

func (s schedSpec) YAML() string {
	var b strings.Builder
	b.WriteString("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
	if s.PercentageToScore > 0 {
		fmt.Fprintf(&b, "percentageOfNodesToScore: %d\n", s.PercentageToScore)
	}
	if s.ClientQPS > 0 {
		fmt.Fprintf(&b, "clientConnection: {qps: %d, burst: %d}\n", s.ClientQPS, s.ClientQPS)
	}
	fmt.Fprintf(&b, "profiles:\n  - schedulerName: %s\n", schedulerName)
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
		// scoring off: the extender's ranking alone decides (docs/design.md#scheduler-plugin).
		b.WriteString("    plugins:\n      score:\n        disabled:\n          - name: '*'\n")
	}
	if s.ExtenderURL != "" {
		b.WriteString(extenderYAML(s.ExtenderURL, ""))
	}
	return b.String()
}

// extenderYAML is the `extenders:` section for the waterline extender at url; a tlsConfig
// (a YAML flow mapping: caFile, certFile, keyFile, serverName) turns on HTTPS.
func extenderYAML(url, tlsConfig string) string {
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

// ---------------------------------------------------------------- the stack

type stackOptions struct {
	Nodes      int
	NodeCPU    string // allocatable cpu of the fake nodes (default "8")
	CPUBusy    func(i int) float64
	MemoryUsed float64
	Policy     policySpec
	// NoPrometheus: no exporter/Prometheus; StaticFile is given to the collector instead.
	StaticFile string
	// Scheduler: start the in-process scheduler with this config.
	Sched *schedSpec
	// WaitMetrics: wait until the collector holds a sample of every policy
	// metric for every node (Prometheus mode).
	WaitMetrics bool
	// ExtenderArgs: extra flags for waterline-extender.
	ExtenderArgs []string
	// CollectorArgs: extra flags for waterline-collector.
	CollectorArgs []string
}

type stack struct {
	t        *testing.T
	ctx      context.Context
	cluster  *harness.Cluster
	nodes    []string
	exporter *fakeexporter.Exporter
	prom     *proc
	promURL  string

	policyPath string
	opts       stackOptions

	collector, scorer, extender   *proc
	collectorGRPC, collectorAdmin string
	scorerGRPC, scorerAdmin       string
	extenderHTTP, extenderAdmin   string
	kubeWatch                     bool // collector runs with --kubeconfig
	collectorConn                 *grpc.ClientConn
	collectorClient               wlv1.CollectorServiceClient
	scorerClient                  wlv1.ScorerServiceClient
	stopSched                     func()
}

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

func newStack(ctx context.Context, t *testing.T, o stackOptions) *stack {
	t.Helper()
	for _, b := range []string{"waterline-collector", "waterline-scorer", "waterline-extender"} {
		needBinary(t, b)
	}
	if o.NodeCPU == "" {
		o.NodeCPU = "8"
	}
	s := &stack{t: t, ctx: ctx, opts: o}
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")

	t0 := time.Now()
	c, err := harness.Start(ctx, t, harness.Options{KubeconfigPath: kubeconfig})
	if err != nil {
		t.Fatalf("control plane: %v", err)
	}
	s.cluster = c
	t.Cleanup(func() {
		if s.stopSched != nil {
			s.stopSched()
			s.stopSched = nil
		}
		c.Stop()
	})

	s.nodes, err = harness.CreateFakeNodes(ctx, c.Client, harness.NodeSpec{
		Count: o.Nodes, CPU: o.NodeCPU, Memory: "32Gi", IPPrefix: ipPrefix(o.Nodes), Parallelism: 32,
	})
	if err != nil {
		t.Fatalf("fake nodes: %v", err)
	}
	t.Logf("stack: control plane + %d nodes in %v", o.Nodes, time.Since(t0).Round(time.Millisecond))

	if o.StaticFile == "" {
		var fns []fakeexporter.Node
		for i := 0; i < o.Nodes; i++ {
			ip, _ := harness.NodeIP(ipPrefix(o.Nodes), i)
			busy := 0.2
			if o.CPUBusy != nil {
				busy = o.CPUBusy(i)
			}
			cores, _ := strconv.Atoi(o.NodeCPU)
			fns = append(fns, fakeexporter.Node{Name: nodeName(i), Instance: ip + ":9100", Cores: cores, MemoryBytes: 32 << 30, CPUBusy: busy, MemoryUsed: o.MemoryUsed})
		}
		s.exporter, err = fakeexporter.Start(fns)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.exporter.Close)
		s.prom, s.promURL = startPrometheus(ctx, t, s.exporter.ScrapeConfigs(), "1s")
	}

	s.policyPath = filepath.Join(dir, "policy.yaml")
	s.writePolicy(o.Policy)

	s.collectorGRPC, s.collectorAdmin = freeAddr(t), freeAddr(t)
	cargs := []string{"--grpc-addr", s.collectorGRPC, "--admin-addr", s.collectorAdmin, "--policy", s.policyPath}
	if o.StaticFile != "" {
		cargs = append(cargs, "--static", o.StaticFile)
	} else {
		cargs = append(cargs, "--prometheus-url", s.promURL)
	}
	if binaryHasFlag(t, "waterline-collector", "--kubeconfig") {
		s.kubeWatch = true
		cargs = append(cargs, "--kubeconfig", kubeconfig)
	} else {
		t.Logf("BLOCKED(partly): waterline-collector has no --kubeconfig yet: no pod watch (ledger only from Reserve) and no node watch; mapping instance IPs with --node-map")
		nm := filepath.Join(dir, "node-map.yaml")
		var b strings.Builder
		b.WriteString("nodes:\n")
		for i := 0; i < o.Nodes; i++ {
			ip, _ := harness.NodeIP(ipPrefix(o.Nodes), i)
			fmt.Fprintf(&b, "  - {name: %s, addresses: [%s]}\n", nodeName(i), ip)
		}
		if err := os.WriteFile(nm, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		cargs = append(cargs, "--node-map", nm)
	}
	cargs = append(cargs, o.CollectorArgs...)
	s.collector = startProc(t, "collector", needBinary(t, "waterline-collector"), cargs...)
	waitReady(ctx, t, s.collector, s.collectorAdmin, 60*time.Second)

	conn, err := grpc.NewClient(s.collectorGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.collectorConn = conn
	s.collectorClient = wlv1.NewCollectorServiceClient(conn)

	s.scorerGRPC, s.scorerAdmin = freeAddr(t), freeAddr(t)
	s.scorer = startProc(t, "scorer", needBinary(t, "waterline-scorer"),
		"--grpc-addr", s.scorerGRPC, "--admin-addr", s.scorerAdmin,
		"--collector-url", "http://"+s.collectorGRPC, "--policy", s.policyPath)
	waitReady(ctx, t, s.scorer, s.scorerAdmin, 60*time.Second)
	sconn, err := grpc.NewClient(s.scorerGRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sconn.Close() })
	s.scorerClient = wlv1.NewScorerServiceClient(sconn)

	ext := s.startExtender("extender", o.ExtenderArgs...)
	s.extender, s.extenderHTTP, s.extenderAdmin = ext.proc, ext.http, ext.admin
	t.Logf("stack: prometheus %s, collector %s, scorer %s, extender %s (%v since start)",
		s.promURL, s.collectorGRPC, s.scorerGRPC, s.extenderHTTP, time.Since(t0).Round(time.Millisecond))

	if o.WaitMetrics {
		s.waitMetrics(func(node string, m map[string]float64) bool {
			for _, ms := range o.Policy.Metrics {
				if _, ok := m[ms.Name]; !ok {
					return false
				}
			}
			return true
		}, "every node has every metric")
		t.Logf("stack: metrics flowing (%v since start)", time.Since(t0).Round(time.Millisecond))
	}
	if o.Sched != nil {
		s.startScheduler(*o.Sched)
	}
	return s
}

func (s *stack) extenderURL() string { return "http://" + s.extenderHTTP + "/waterline/v1" }

// extenderProc is one waterline-extender process of the stack.
type extenderProc struct {
	proc        *proc
	http, admin string
}

// url is the extender's URL prefix for the scheduler config.
func (e extenderProc) url() string { return "http://" + e.http + "/waterline/v1" }

// startExtender starts a waterline-extender (named name in the logs) against the stack's
// scorer and policy, with extra flags after the stack's own (none of which they may repeat:
// clap refuses a flag given twice), and waits until it is ready. newStack starts the stack's extender with it;
// a test may start another beside it (TestThroughput's old-path extender).
func (s *stack) startExtender(name string, extra ...string) extenderProc {
	s.t.Helper()
	e := extenderProc{http: freeAddr(s.t), admin: freeAddr(s.t)}
	args := []string{"--http-addr", e.http, "--admin-addr", e.admin,
		"--scorer-url", "http://" + s.scorerGRPC, "--prefix", "/waterline/v1",
		"--scheduler-names", schedulerName, "--policy", s.policyPath,
		// Just under kube-scheduler's httpTimeout (1s): the default 200 ms suits a quiet
		// cluster, but on a loaded test machine a slow call would turn into a neutral answer
		// and a wrong placement, which is not what these scenarios test.
		"--scorer-timeout", "900ms"}
	args = append(args, extra...)
	e.proc = startProc(s.t, name, needBinary(s.t, "waterline-extender"), args...)
	waitReady(s.ctx, s.t, e.proc, e.admin, 60*time.Second)
	return e
}

func (s *stack) writePolicy(p policySpec) {
	if err := os.WriteFile(s.policyPath, []byte(p.YAML()), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// startScheduler (re)starts the in-process kube-scheduler.
func (s *stack) startScheduler(spec schedSpec) {
	s.t.Helper()
	s.stopScheduler()
	path := filepath.Join(s.t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(path, []byte(spec.YAML()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	// The Waterline plugin is registered in every run; only a profile that
	// enables it (schedSpec.Plugin) uses it.
	stop, err := harness.StartScheduler(s.ctx, harness.SchedulerOptions{
		ConfigFile: path, KubeconfigPath: s.cluster.KubeconfigPath, WorkDir: filepath.Dir(path),
		Registry: []app.Option{app.WithPlugin(waterline.Name, waterline.New)},
	})
	if err != nil {
		s.t.Fatalf("kube-scheduler: %v\n%s", err, spec.YAML())
	}
	s.stopSched = stop
}

func (s *stack) stopScheduler() {
	if s.stopSched != nil {
		s.stopSched()
		s.stopSched = nil
	}
}

// listNodes calls CollectorService/ListNodes.
func (s *stack) listNodes() (*wlv1.ListNodesResponse, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	return s.collectorClient.ListNodes(ctx, &wlv1.ListNodesRequest{})
}

// scorerLedgerPercent is, per node, the ledger share (percent of capacity, summed over the
// policy's metrics) that the scorer itself would add for recent placements: what it has
// learnt of the ledger, which reaches it over the collector's stream after the collector.
func (s *stack) scorerLedgerPercent() (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	resp, err := s.scorerClient.Score(ctx, &wlv1.ScoreRequest{
		Pod:       &wlv1.PodInfo{Namespace: "default", Name: "ledger-probe", Uid: "ledger-probe", CpuRequestMillis: 1},
		NodeNames: s.nodes,
		Explain:   true,
	})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, ns := range resp.GetScores() {
		for _, term := range ns.GetTerms() {
			out[ns.GetNodeName()] += term.GetLedgerPercent()
		}
	}
	return out, nil
}

// waitScorerLedgerGrows waits until the scorer's ledger share on node exceeds before[node]:
// the placement that raised the collector's ledger has reached the scorer too.
func (s *stack) waitScorerLedgerGrows(node string, before map[string]float64) {
	s.t.Helper()
	err := waitFor(s.ctx, 30*time.Second, 50*time.Millisecond, "scorer's ledger share on "+node, func() (bool, error) {
		now, err := s.scorerLedgerPercent()
		return err == nil && now[node] > before[node], err
	})
	if err != nil {
		s.t.Fatal(err)
	}
}

// metrics returns node -> metric -> value percent.
func (s *stack) metrics() (map[string]map[string]float64, error) {
	resp, err := s.listNodes()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for _, n := range resp.GetNodes() {
		m := map[string]float64{}
		for _, ms := range n.GetMetrics() {
			m[ms.GetMetric()] = ms.GetValuePercent()
		}
		out[n.GetName()] = m
	}
	return out, nil
}

// waitMetrics waits until ok(node, metrics) holds for every fake node.
func (s *stack) waitMetrics(ok func(node string, m map[string]float64) bool, what string) {
	s.t.Helper()
	var last map[string]map[string]float64
	err := waitFor(s.ctx, 90*time.Second, 500*time.Millisecond, what, func() (bool, error) {
		all, err := s.metrics()
		if err != nil {
			return false, err
		}
		last = all
		for _, n := range s.nodes {
			if !ok(n, all[n]) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		s.t.Fatalf("%v\nlast ListNodes metrics: %v\n--- collector ---\n%s", err, last, s.collector.Tail(3000))
	}
}

// ledger returns pod uid -> entry.
func (s *stack) ledger() (map[string]*wlv1.LedgerEntry, error) {
	resp, err := s.listNodes()
	if err != nil {
		return nil, err
	}
	out := map[string]*wlv1.LedgerEntry{}
	for _, e := range resp.GetLedger() {
		out[e.GetPodUid()] = e
	}
	return out, nil
}

// ---------------------------------------------------------------- pods

type podOpt func(*v1.Pod)

func withLabels(kv ...string) podOpt {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withCPU(request, limit string) podOpt {
	return func(p *v1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Requests[v1.ResourceCPU] = resource.MustParse(request)
		if limit != "" {
			if r.Limits == nil {
				r.Limits = v1.ResourceList{}
			}
			r.Limits[v1.ResourceCPU] = resource.MustParse(limit)
		}
	}
}

func newPod(ns, name string, opts ...podOpt) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"e2e": "waterline"}},
		Spec: v1.PodSpec{
			SchedulerName: schedulerName,
			Containers: []v1.Container{{
				Name:  "c",
				Image: "registry.invalid/never-pulled:1",
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
					v1.ResourceCPU:    resource.MustParse("100m"),
					v1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (s *stack) ensureNamespace(ns string) {
	if ns == "default" {
		return
	}
	_, err := s.cluster.Client.CoreV1().Namespaces().Create(s.ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		s.t.Fatal(err)
	}
}

// createPods creates the pods concurrently (workers parallel calls).
func (s *stack) createPods(pods []*v1.Pod, workers int) {
	s.t.Helper()
	if workers <= 0 {
		workers = 16
	}
	errs := make(chan error, len(pods))
	work := make(chan *v1.Pod)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				if _, err := s.cluster.Client.CoreV1().Pods(p.Namespace).Create(s.ctx, p, metav1.CreateOptions{}); err != nil {
					errs <- fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
				}
			}
		}()
	}
	for _, p := range pods {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		s.t.Fatal(err)
	}
}

// waitScheduled waits until every named pod in ns has spec.nodeName; returns name -> node.
func (s *stack) waitScheduled(ns string, names []string, timeout time.Duration) map[string]string {
	s.t.Helper()
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	got := map[string]string{}
	err := waitFor(s.ctx, timeout, 200*time.Millisecond, fmt.Sprintf("%d pods scheduled", len(names)), func() (bool, error) {
		list, err := s.cluster.Client.CoreV1().Pods(ns).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range list.Items {
			if want[p.Name] && p.Spec.NodeName != "" {
				got[p.Name] = p.Spec.NodeName
			}
		}
		return len(got) == len(want), nil
	})
	if err != nil {
		var pending []string
		for n := range want {
			if _, ok := got[n]; !ok {
				pending = append(pending, n)
			}
		}
		sort.Strings(pending)
		msg := ""
		if len(pending) > 0 {
			msg = s.podConditions(ns, pending[0])
		}
		s.t.Fatalf("%v; pending: %v; %s", err, pending, msg)
	}
	return got
}

func (s *stack) podConditions(ns, name string) string {
	p, err := s.cluster.Client.CoreV1().Pods(ns).Get(s.ctx, name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s) ", c.Type, c.Status, c.Reason, c.Message)
	}
	return fmt.Sprintf("pod %s/%s conditions: %s", ns, name, b.String())
}

func podNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// countPerNode counts placements per fake node (every fake node present, 0 included).
func (s *stack) countPerNode(placed map[string]string) map[string]int {
	c := map[string]int{}
	for _, n := range s.nodes {
		c[n] = 0
	}
	for _, n := range placed {
		c[n]++
	}
	return c
}

func minMax(c map[string]int) (int, int) {
	lo, hi := 1<<30, -1
	for _, v := range c {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

func fmtCounts(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(keys[i], "node-"))
		b, _ := strconv.Atoi(strings.TrimPrefix(keys[j], "node-"))
		return a < b
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, c[k])
	}
	return strings.Join(parts, " ")
}
