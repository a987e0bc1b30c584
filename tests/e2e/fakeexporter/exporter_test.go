package fakeexporter

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestPodsAddToTheNodeAndServeTheirOwnSeries(t *testing.T) {
	e, err := Start([]Node{{Name: "n1", Instance: "127.0.0.1:9100", Cores: 4, MemoryBytes: 1000, CPUBusy: 0.1, MemoryUsed: 0.2}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	web := PodKey{Namespace: "shop", Pod: "web-1"}
	e.SetPodUsage("n1", web, PodUsage{Cores: 1, MemoryBytes: 300})

	e.mu.Lock()
	s := e.nodes["n1"]
	// 0.1 of 4 cores plus 1 core = 1.4 of 4 = 0.35; memory 1000 × 0.8 − 300 = 500 free.
	if got := s.busy(); got != 0.35 {
		t.Errorf("busy %v, want 0.35", got)
	}
	if got := s.available(); got != 500 {
		t.Errorf("available %v, want 500", got)
	}
	// Ten seconds on: the pod's counter grows 1 core × 10 s, the node's busy seconds 0.35 × 10.
	busyBefore, cpuBefore := s.busySec, s.pods[web].cpuSec
	s.advance(s.last.Add(10 * time.Second))
	if d := s.pods[web].cpuSec - cpuBefore; d != 10 {
		t.Errorf("pod counter grew %v, want 10", d)
	}
	if d := s.busySec - busyBefore; d < 3.4999 || d > 3.5001 {
		t.Errorf("node busy seconds grew %v, want 3.5", d)
	}
	e.mu.Unlock()

	resp, err := http.Get("http://" + e.Addr() + "/nodes/n1/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`container_cpu_usage_seconds_total{namespace="shop",pod="web-1",container="app"} `,
		`container_memory_working_set_bytes{namespace="shop",pod="web-1",container="app"} 300`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("missing %q in\n%s", want, body)
		}
	}
	e.RemovePod("n1", web)
	e.mu.Lock()
	if got := e.nodes["n1"].busy(); got != 0.1 {
		t.Errorf("busy after the pod left %v, want 0.1", got)
	}
	e.mu.Unlock()
}
