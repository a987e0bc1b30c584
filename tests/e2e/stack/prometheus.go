package stack

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// PrometheusBin is Debian's Prometheus (scripts/deps/prometheus.sh installs it).
const PrometheusBin = "/usr/bin/prometheus"

var intervalRe = regexp.MustCompile(`(?m)^(\s*(?:- )?)interval:\s*\S+`)

// StartPrometheus runs the real Prometheus with scrapeConfigs (the entries of
// scrape_configs:, e.g. fakeexporter's), scraping every scrapeInterval and evaluating
// deploy/prometheus/rules.yml every second (every group's interval rewritten to 1s);
// it returns the process and its URL once /-/ready answers.
func StartPrometheus(ctx context.Context, t testing.TB, scrapeConfigs string, scrapeInterval string) (*Proc, string) {
	t.Helper()
	if _, err := os.Stat(PrometheusBin); err != nil {
		t.Fatalf("%s missing: run scripts/deps/prometheus.sh", PrometheusBin)
	}
	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(RepoRoot(), "deploy", "prometheus", "rules.yml"))
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
	addr := FreeAddr(t)
	p := StartProc(t, "prometheus", PrometheusBin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--storage.tsdb.retention.time=1d",
		"--log.level=warn")
	url := "http://" + addr
	if err := WaitPrometheusReady(ctx, p, url); err != nil {
		t.Fatalf("%v\n%s", err, p.Tail(4000))
	}
	return p, url
}

// WaitPrometheusReady waits up to a minute for url/-/ready (after a start or a restart).
func WaitPrometheusReady(ctx context.Context, p *Proc, url string) error {
	return WaitFor(ctx, 60*time.Second, 200*time.Millisecond, "prometheus /-/ready", func() (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("prometheus exited")
		}
		return HTTPOK(url + "/-/ready")
	})
}
