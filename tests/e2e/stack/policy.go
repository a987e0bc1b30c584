package stack

import (
	"fmt"
	"strings"
)

// Metric is one entry of a generated policy's metrics list (polled every second).
type Metric struct {
	Name, Resource, Query string
	FilterAbove           float64 // 0: none
	Weight                float64
	Window                string // the averaging window inside the query; "": the policy's 5m
}

// The two metrics the scenarios use, over the recording rules of
// deploy/prometheus/rules.yml, weight 0.5 each and no filter.
var (
	CPUAvg5m = Metric{Name: "cpu_usage_avg_5m", Resource: "cpu", Query: "waterline:node_cpu_usage:avg5m", Weight: 0.5}
	MemAvg5m = Metric{Name: "mem_usage_avg_5m", Resource: "memory", Query: "waterline:node_memory_usage:avg5m", Weight: 0.5}
)

// WithFilter is m with `filterAbove: above`.
func (m Metric) WithFilter(above float64) Metric {
	m.FilterAbove = above
	return m
}

// Policy is the policy file of a stack: written by Stack.WritePolicy, read by the
// collector, the scorer and the extender.
type Policy struct {
	Metrics      []Metric
	Curve        string // YAML flow mapping; default waterLevel 40
	Ledger       bool
	ScoreMapping string // round | rescale
	// Stale is the `stale:` section (a YAML flow mapping); "": {filter: pass, score: 50}.
	Stale     string
	ExtraYAML string
	// Raw: a whole policy file used as written (e.g. deploy/policy/policy.yaml); the
	// fields above are then ignored.
	Raw string
}

// YAML is the policy file. Besides the fields: stale samples pass with score 50 (unless Stale says otherwise), pods
// sharing a SpreadKey value are kept apart, and nodes are found by the `node` or
// `instance` label.
func (ps Policy) YAML() string {
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
		if m.Window != "" {
			fmt.Fprintf(&b, ", window: %s", m.Window)
		}
		b.WriteString("}\n")
	}
	curve := ps.Curve
	if curve == "" {
		curve = "{kind: waterLevel, target: 40}"
	}
	fmt.Fprintf(&b, "curve: %s\n", curve)
	stale := ps.Stale
	if stale == "" {
		stale = "{filter: pass, score: 50}"
	}
	fmt.Fprintf(&b, "stale: %s\n", stale)
	fmt.Fprintf(&b, "ledger: {enabled: %t}\n", ps.Ledger)
	fmt.Fprintf(&b, "antiColocation: [{labelKey: %s}]\n", SpreadKey)
	fmt.Fprintf(&b, "nodeMapping: {labels: [node, instance]}\n")
	sm := ps.ScoreMapping
	if sm == "" {
		sm = "round"
	}
	fmt.Fprintf(&b, "extender: {scoreMapping: %s}\n", sm)
	b.WriteString(ps.ExtraYAML)
	return b.String()
}
