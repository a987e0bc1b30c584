package stack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a child process with its output appended to a log file (every start of it);
// killed at the cleanup of the test that started it, and by the kernel if the test
// process dies first.
type Proc struct {
	// Name names the process in logs and in failure messages.
	Name string
	// Path is the executable.
	Path string
	// LogPath is the file its stdout and stderr go to.
	LogPath string

	mu   sync.Mutex
	args []string
	cmd  *exec.Cmd
	done chan struct{}
}

// StartProc starts path with args; t's cleanup stops it and, when t failed, logs the tail
// of its output.
func StartProc(t testing.TB, name, path string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Name: name, Path: path, args: args, LogPath: filepath.Join(t.TempDir(), name+".log")}
	if err := p.start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("--- last output of %s (%s) ---\n%s", name, p.LogPath, p.Tail(4000))
		}
	})
	return p
}

func (p *Proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(f, "=== %s %s %s\n", time.Now().Format(time.RFC3339Nano), p.Path, strings.Join(p.args, " "))
	cmd := exec.Command(p.Path, p.args...)
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

// Args is a copy of the arguments the next start uses.
func (p *Proc) Args() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.args...)
}

// WithFlags is args with each flag of kv (flag, value, flag, value, ...) set: replaced
// where args has it, appended where not. For starting a second replica from a first's args.
func WithFlags(args []string, kv ...string) []string {
	out := append([]string(nil), args...)
	for k := 0; k+1 < len(kv); k += 2 {
		found := false
		for i := 0; i+1 < len(out); i++ {
			if out[i] == kv[k] {
				out[i+1], found = kv[k+1], true
				break
			}
		}
		if !found {
			out = append(out, kv[k], kv[k+1])
		}
	}
	return out
}

// SetFlag sets flag's value in p's arguments (appending the flag when absent); it takes
// effect at p's next start.
func (p *Proc) SetFlag(flag, value string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 0; i+1 < len(p.args); i++ {
		if p.args[i] == flag {
			p.args[i+1] = value
			return
		}
	}
	p.args = append(p.args, flag, value)
}

// Running reports whether the process has been started and has not exited.
func (p *Proc) Running() bool {
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
func (p *Proc) signal(sig syscall.Signal, wait time.Duration) {
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

// Stop sends SIGTERM, then SIGKILL after 5 s.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM, 5*time.Second) }

// Kill sends SIGKILL (a crash).
func (p *Proc) Kill() { p.signal(syscall.SIGKILL, 5*time.Second) }

// Restart stops p (SIGTERM) and starts it again with its current arguments, failing t
// (which may be a subtest of the test that started p) if it cannot.
func (p *Proc) Restart(t testing.TB) {
	t.Helper()
	p.Stop()
	if err := p.start(); err != nil {
		t.Fatalf("restart %s: %v", p.Name, err)
	}
}

// Tail is the last n bytes of the log.
func (p *Proc) Tail(n int64) string {
	f, err := os.Open(p.LogPath)
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

// LogSize is the log's length in bytes (an offset for reading what comes after).
func (p *Proc) LogSize() int {
	st, err := os.Stat(p.LogPath)
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// CheckNoPanic fails t if any process's log (every start of it: the log is appended to)
// says "panicked".
func CheckNoPanic(t testing.TB, procs ...*Proc) {
	t.Helper()
	for _, p := range procs {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			t.Errorf("%s log: %v", p.Name, err)
			continue
		}
		if i := bytes.Index(b, []byte("panicked")); i >= 0 {
			lo, hi := max(0, i-300), min(len(b), i+700)
			t.Errorf("%s panicked:\n%s", p.Name, b[lo:hi])
		}
	}
}

// KeepLogs copies the processes' logs to tests/e2e/results/<prefix>-<name>.log
// (git-ignored), for reading what each process said during a test.
func KeepLogs(t testing.TB, prefix string, procs ...*Proc) {
	for _, p := range procs {
		b, err := os.ReadFile(p.LogPath)
		if err != nil {
			continue
		}
		WriteResult(t, prefix+"-"+p.Name+".log", string(b))
	}
}

// ---------------------------------------------------------------- waiting

// WaitFor polls cond every `every` until it returns (true, nil); after timeout (or when
// ctx ends) the error names what and cond's last error.
func WaitFor(ctx context.Context, timeout, every time.Duration, what string, cond func() (bool, error)) error {
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

// httpc bounds every request the helpers send to a process of the stack.
var httpc = &http.Client{Timeout: 3 * time.Second}

// HTTPOK reports whether GET url answers 200.
func HTTPOK(url string) (bool, error) {
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

// WaitReady polls http://admin/ready (a waterline process's admin port) until it answers
// 200, failing t with the process's log if it exits first or never does.
func WaitReady(ctx context.Context, t testing.TB, p *Proc, admin string, timeout time.Duration) {
	t.Helper()
	err := WaitFor(ctx, timeout, 200*time.Millisecond, p.Name+" /ready", func() (bool, error) {
		if !p.Running() {
			return false, fmt.Errorf("%s exited", p.Name)
		}
		return HTTPOK("http://" + admin + "/ready")
	})
	if err != nil {
		t.Fatalf("%v\n--- %s log ---\n%s", err, p.Name, p.Tail(4000))
	}
}
