// Package fakeexporter is a fake node-exporter for the e2e suite: one HTTP
// server that serves, per fake node, node_cpu_seconds_total counters growing at
// a settable busy fraction plus node_memory_MemTotal_bytes and
// node_memory_MemAvailable_bytes gauges, at /nodes/<name>/metrics.
//
// ScrapeConfigs lists one Prometheus target per node with __metrics_path__ and
// instance set, so every series carries instance="<node InternalIP>:9100",
// exactly as a real node-exporter scraped by node IP would (no node label; the
// collector maps the IP to the Kubernetes node through the node watch).
//
// CPU counters are integrated over wall time: when a busy fraction changes the
// counters carry on from where they were, so rate() over any window gives the
// time-weighted busy fraction. The Go twin of tests/src/exporter.rs.
//
// A node may also run pods with a settable true usage (SetPodUsage): the node serves
// cAdvisor-style container_cpu_usage_seconds_total counters and
// container_memory_working_set_bytes gauges for each of them, labelled namespace, pod and
// container as the kubelet's cAdvisor endpoint labels them, and the pods' cores add to the
// node's busy fraction, so the node series and the per-pod series tell one story.
package fakeexporter

import (
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
)

// userShare of the busy seconds is counted in mode="user", the rest in "system".
const userShare = 0.7

// JobName is the job label of the scrape config.
const JobName = "node-exporter"

// Node is one fake machine.
type Node struct {
	Name        string  // URL key, e.g. the Kubernetes node name
	Instance    string  // instance label, e.g. "127.0.1.3:9100"
	Cores       int     // number of cpu="i" series
	MemoryBytes float64 // node_memory_MemTotal_bytes
	CPUBusy     float64 // 0..1
	MemoryUsed  float64 // 0..1
}

type nodeState struct {
	Node
	last    time.Time
	busySec float64 // per core, accumulated busy seconds
	idleSec float64 // per core, accumulated idle seconds
	pods    map[PodKey]*podState
}

// PodKey names a pod as cAdvisor's labels do.
type PodKey struct{ Namespace, Pod string }

// PodUsage is what a pod really uses.
type PodUsage struct {
	Cores       float64
	MemoryBytes float64
}

type podState struct {
	PodUsage
	cpuSec float64 // accumulated cpu seconds, the counter's value
}

// available is the node's free memory: its own background and its pods' working sets taken.
func (s *nodeState) available() float64 {
	free := s.MemoryBytes * (1 - s.MemoryUsed)
	for _, p := range s.pods {
		free -= p.MemoryBytes
	}
	return max(free, 0)
}

// busy is the node's busy fraction per core: its own background plus its pods' cores,
// at most every core.
func (s *nodeState) busy() float64 {
	b := s.CPUBusy
	for _, p := range s.pods {
		b += p.Cores / float64(s.Cores)
	}
	return min(b, 1)
}

// Exporter is a running fake exporter.
type Exporter struct {
	mu    sync.Mutex
	nodes map[string]*nodeState
	srv   *http.Server
	ln    net.Listener
}

// Start serves the given nodes on a free loopback port.
func Start(nodes []Node) (*Exporter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &Exporter{nodes: map[string]*nodeState{}, ln: ln}
	now := time.Now()
	for _, n := range nodes {
		if n.Cores <= 0 {
			n.Cores = 8
		}
		if n.MemoryBytes <= 0 {
			n.MemoryBytes = 32 << 30
		}
		// Start with some history so counters are not at zero.
		e.nodes[n.Name] = &nodeState{Node: n, last: now, busySec: 1000 * n.CPUBusy, idleSec: 1000 * (1 - n.CPUBusy), pods: map[PodKey]*podState{}}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/nodes/", e.serve)
	e.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = e.srv.Serve(ln) }()
	return e, nil
}

// Addr is host:port of the exporter.
func (e *Exporter) Addr() string { return e.ln.Addr().String() }

// Close stops the server.
func (e *Exporter) Close() { _ = e.srv.Close() }

func (s *nodeState) advance(now time.Time) {
	dt := now.Sub(s.last).Seconds()
	if dt > 0 {
		busy := s.busy()
		s.busySec += dt * busy
		s.idleSec += dt * (1 - busy)
		for _, p := range s.pods {
			p.cpuSec += dt * p.Cores
		}
		s.last = now
	}
}

// SetPodUsage runs (or updates) a pod on a node from now on; its counter carries on from
// where it was. The pod's usage adds to the node's series.
func (e *Exporter) SetPodUsage(node string, pod PodKey, usage PodUsage) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.nodes[node]; ok {
		s.advance(time.Now())
		if p, ok := s.pods[pod]; ok {
			p.PodUsage = usage
		} else {
			s.pods[pod] = &podState{PodUsage: usage}
		}
	}
}

// RemovePod stops a pod on a node: its series go, as cAdvisor's do.
func (e *Exporter) RemovePod(node string, pod PodKey) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.nodes[node]; ok {
		s.advance(time.Now())
		delete(s.pods, pod)
	}
}

// SetCPUBusy changes a node's busy fraction from now on.
func (e *Exporter) SetCPUBusy(name string, busy float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.nodes[name]; ok {
		s.advance(time.Now())
		s.CPUBusy = busy
	}
}

// SetMemoryUsed changes a node's used memory fraction.
func (e *Exporter) SetMemoryUsed(name string, used float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.nodes[name]; ok {
		s.MemoryUsed = used
	}
}

func (e *Exporter) serve(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/nodes/")
	name, ok := strings.CutSuffix(rest, "/metrics")
	if !ok {
		http.NotFound(w, r)
		return
	}
	e.mu.Lock()
	s, found := e.nodes[name]
	var b strings.Builder
	if found {
		s.advance(time.Now())
		b.WriteString("# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.\n# TYPE node_cpu_seconds_total counter\n")
		for c := 0; c < s.Cores; c++ {
			fmt.Fprintf(&b, "node_cpu_seconds_total{cpu=\"%d\",mode=\"idle\"} %.6f\n", c, s.idleSec)
			fmt.Fprintf(&b, "node_cpu_seconds_total{cpu=\"%d\",mode=\"user\"} %.6f\n", c, s.busySec*userShare)
			fmt.Fprintf(&b, "node_cpu_seconds_total{cpu=\"%d\",mode=\"system\"} %.6f\n", c, s.busySec*(1-userShare))
		}
		b.WriteString("# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n# TYPE node_memory_MemTotal_bytes gauge\n")
		fmt.Fprintf(&b, "node_memory_MemTotal_bytes %.0f\n", s.MemoryBytes)
		b.WriteString("# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n# TYPE node_memory_MemAvailable_bytes gauge\n")
		fmt.Fprintf(&b, "node_memory_MemAvailable_bytes %.0f\n", s.available())
		writePods(&b, s.pods)
	}
	e.mu.Unlock()
	if !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(b.String()))
}

func writePods(b *strings.Builder, pods map[PodKey]*podState) {
	if len(pods) == 0 {
		return
	}
	keys := make([]PodKey, 0, len(pods))
	for k := range pods {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].Namespace+"/"+keys[i].Pod < keys[j].Namespace+"/"+keys[j].Pod
	})
	b.WriteString("# HELP container_cpu_usage_seconds_total Cumulative cpu time consumed in seconds.\n# TYPE container_cpu_usage_seconds_total counter\n")
	for _, k := range keys {
		fmt.Fprintf(b, "container_cpu_usage_seconds_total{namespace=%q,pod=%q,container=\"app\"} %.6f\n", k.Namespace, k.Pod, pods[k].cpuSec)
	}
	b.WriteString("# HELP container_memory_working_set_bytes Current working set in bytes.\n# TYPE container_memory_working_set_bytes gauge\n")
	for _, k := range keys {
		fmt.Fprintf(b, "container_memory_working_set_bytes{namespace=%q,pod=%q,container=\"app\"} %.0f\n", k.Namespace, k.Pod, pods[k].MemoryBytes)
	}
}

// ScrapeConfigs returns the entries of prometheus.yml's scrape_configs (YAML,
// a block sequence at column 0): one job, one static target per node.
func (e *Exporter) ScrapeConfigs() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	names := make([]string, 0, len(e.nodes))
	for n := range e.nodes {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	fmt.Fprintf(&b, "- job_name: %s\n  static_configs:\n", JobName)
	for _, n := range names {
		s := e.nodes[n]
		fmt.Fprintf(&b, "    - targets: ['%s']\n      labels:\n        __metrics_path__: '/nodes/%s/metrics'\n        instance: '%s'\n", e.Addr(), n, s.Instance)
	}
	return b.String()
}
