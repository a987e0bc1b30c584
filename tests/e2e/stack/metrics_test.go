package stack

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// exposition is what prometheus-client (the Rust services' /metrics) writes: OpenMetrics
// text, counters declared without `_total` and sampled with it, histograms with `le`
// bounds written as floats, `# EOF` at the end.
const exposition = `# HELP waterline_extender_scorer_requests Scorer calls.
# TYPE waterline_extender_scorer_requests counter
waterline_extender_scorer_requests_total{code="OK",method="Evaluate"} 5
waterline_extender_scorer_requests_total{code="OK",method="Score"} 2
waterline_extender_scorer_requests_total{code="Unavailable",method="Evaluate"} 1
# HELP waterline_policy_file_valid Whether the file parsed.
# TYPE waterline_policy_file_valid gauge
waterline_policy_file_valid 1
# HELP waterline_shadow_regret Regret.
# TYPE waterline_shadow_regret histogram
waterline_shadow_regret_sum{scheduler="default-scheduler"} 162.0
waterline_shadow_regret_count{scheduler="default-scheduler"} 8
waterline_shadow_regret_bucket{le="0.0",scheduler="default-scheduler"} 4
waterline_shadow_regret_bucket{le="50.0",scheduler="default-scheduler"} 5
waterline_shadow_regret_bucket{le="+Inf",scheduler="default-scheduler"} 8
# HELP waterline_scorer_grpc_request_duration_seconds Handler time.
# TYPE waterline_scorer_grpc_request_duration_seconds histogram
waterline_scorer_grpc_request_duration_seconds_sum{method="Score"} 0.25
waterline_scorer_grpc_request_duration_seconds_count{method="Score"} 100
waterline_scorer_grpc_request_duration_seconds_bucket{le="0.001",method="Score"} 100
waterline_scorer_grpc_request_duration_seconds_bucket{le="+Inf",method="Score"} 100
waterline_scorer_grpc_request_duration_seconds_sum{method="Filter"} 0.0
waterline_scorer_grpc_request_duration_seconds_count{method="Filter"} 0
waterline_scorer_grpc_request_duration_seconds_bucket{le="+Inf",method="Filter"} 0
# EOF
`

func serve(t *testing.T, body string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/openmetrics-text; version=1.0.0; charset=utf-8")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

func TestSamplesReadTheExpositionNames(t *testing.T) {
	admin := serve(t, exposition)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		// 5 + 2: both methods' OK calls; the Unavailable one left out.
		{"waterline_extender_scorer_requests_total", []string{"code", "OK"}, 7},
		{"waterline_extender_scorer_requests_total", nil, 8},
		{"waterline_extender_scorer_requests_total", []string{"code", "OK", "method", "Score"}, 2},
		// The family name without `_total` is not a series of the exposition.
		{"waterline_extender_scorer_requests", nil, 0},
		{"waterline_policy_file_valid", nil, 1},
		{"waterline_shadow_regret_count", []string{"scheduler", "default-scheduler"}, 8},
		{"waterline_shadow_regret_sum", nil, 162},
		// `le` compares as a number: 0.0 written, 0 asked.
		{"waterline_shadow_regret_bucket", []string{"le", "0"}, 4},
		{"waterline_shadow_regret_bucket", []string{"le", "0.0"}, 4},
		{"waterline_shadow_regret_bucket", []string{"le", "+Inf"}, 8},
		{"waterline_no_such_metric", nil, 0},
	} {
		got, err := AdminSum(admin, c.name, c.labels...)
		if err != nil || got != c.want {
			t.Errorf("AdminSum(%s, %v) = %v, %v; want %v", c.name, c.labels, got, err, c.want)
		}
	}
	if _, err := One(Admin(admin), "waterline_extender_scorer_requests_total", "code", "OK"); err == nil {
		t.Errorf("One over two series: want an error")
	}
	if v, err := One(Admin(admin), "waterline_shadow_regret_bucket", "le", "50"); err != nil || v != 5 {
		t.Errorf("One(le=50) = %v, %v; want 5", v, err)
	}
	// A histogram family by its family name (sum, count) per method.
	h := Histograms(Admin(admin), "waterline_scorer_grpc_request_duration_seconds", "method")
	want := map[string][2]float64{"Score": {0.25, 100}, "Filter": {0, 0}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("Histograms = %v, want %v", h, want)
	}
	// 0.25 s over 100 calls = 2.5 ms; the method without calls is left out.
	if got := MeanDurations(admin); !reflect.DeepEqual(got, []string{`waterline_scorer_grpc_request_duration{method="Score"} mean 2.50 ms over 100`}) {
		t.Errorf("MeanDurations = %q", got)
	}
	if got := MeanSummary(map[string][2]float64{"Score": {0.05, 20}}, h); got != "Score mean 2.50 ms over 80" {
		t.Errorf("MeanSummary = %q", got)
	}
}

func TestScrapeReportsWhatIsWrong(t *testing.T) {
	if _, err := AdminSum(serve(t, "waterline_x{a=\"b\" 1\n"), "waterline_x"); err == nil {
		t.Errorf("a malformed exposition: want a parse error")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := AdminSum(srv.Listener.Addr().String(), "waterline_x"); err == nil {
		t.Errorf("HTTP 404: want an error")
	}
	if got := Counter(Admin(srv.Listener.Addr().String()), "waterline_x"); got != -1 {
		t.Errorf("Counter on an unreadable registry = %v, want -1", got)
	}
}
