package stack

// kube-scheduler in a process of its own (the harness binary's `scheduler` subcommand,
// Waterline plugin registered) under `taskset`: TestThroughput's pinned layout, a model
// of a real cluster, where the scheduler does not share its Go runtime with the API
// server and the scorer runs elsewhere.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// PinProcess sets the CPU affinity of every thread of process pid (taskset -a):
// threads and child processes created afterwards inherit it.
func PinProcess(pid int, cpus string) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, out)
	}
	return nil
}

// SchedulerProcess is a kube-scheduler running as `waterline-e2e-cluster scheduler`
// under `taskset -c CPUS`, serving its metrics on plain HTTP.
type SchedulerProcess struct {
	// Metrics is http://host:port/metrics.
	Metrics string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has exited; err is its Wait error
	err     error
	once    sync.Once
}

// StartSchedulerProcess starts spec's scheduler pinned to cpus and waits for its READY
// line (informers synced). It needs tests/e2e/bin/waterline-e2e-cluster (build.sh).
func (s *Stack) StartSchedulerProcess(spec SchedulerSpec, cpus string) *SchedulerProcess {
	s.t.Helper()
	dir := s.t.TempDir()
	path := filepath.Join(dir, "scheduler.yaml")
	if err := os.WriteFile(path, []byte(spec.YAML()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	bin := filepath.Join(RepoRoot(), "tests", "e2e", "bin", "waterline-e2e-cluster")
	addr := FreeAddr(s.t)
	logFile, err := os.Create(filepath.Join(dir, "scheduler.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("taskset", "-c", cpus, bin, "scheduler",
		"--kubeconfig", s.Cluster.KubeconfigPath, "--config", path, "--work-dir", dir,
		"--metrics-addr", addr)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start %s scheduler (tests/e2e/build.sh builds it): %v", bin, err)
	}
	p := &SchedulerProcess{cmd: cmd, Metrics: "http://" + addr + "/metrics", exited: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.TrimSpace(sc.Text()) == "READY" {
				close(ready)
				signalled = true
			}
		}
		p.err = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	s.t.Cleanup(p.Stop)
	select {
	case <-ready:
		return p
	case <-p.exited:
		s.t.Fatalf("scheduler process exited before READY: %v (log %s)", p.err, logFile.Name())
	case <-time.After(2 * time.Minute):
		p.Stop()
		s.t.Fatalf("scheduler process not READY within 2 min (log %s)", logFile.Name())
	}
	return nil
}

// Stop sends SIGTERM and waits (SIGKILL after 60 s); safe to call twice.
func (p *SchedulerProcess) Stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(60 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	})
}
