package harness

import (
	"fmt"
	"io"
	"os"
	"sync"

	"k8s.io/kubernetes/test/utils/ktesting"
)

// ProcessTB is a minimal ktesting.TB for use outside `go test` (the harness
// binary). The upstream in-process test servers expect a testing.TB-like value
// for logging, temp dirs and cleanup registration.
//
// Fatal/FailNow panic with a fatalError; Start recovers it and returns it as an
// error. Cleanups run in LIFO order when RunCleanups is called.
type ProcessTB struct {
	name string
	out  io.Writer

	mu       sync.Mutex
	failed   bool
	cleanups []func()
}

var _ ktesting.TB = (*ProcessTB)(nil)

type fatalError struct{ msg string }

func (f fatalError) Error() string { return f.msg }

// NewProcessTB returns a TB that logs to out (os.Stderr when nil).
func NewProcessTB(name string, out io.Writer) *ProcessTB {
	if out == nil {
		out = os.Stderr
	}
	return &ProcessTB{name: name, out: out}
}

func (p *ProcessTB) Attr(key, value string) { p.Logf("attr %s=%s", key, value) }
func (p *ProcessTB) Chdir(dir string) {
	if err := os.Chdir(dir); err != nil {
		p.Fatalf("chdir %s: %v", dir, err)
	}
}

func (p *ProcessTB) Cleanup(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cleanups = append(p.cleanups, f)
}

// RunCleanups runs the registered cleanups, last registered first.
func (p *ProcessTB) RunCleanups() {
	for {
		p.mu.Lock()
		n := len(p.cleanups)
		if n == 0 {
			p.mu.Unlock()
			return
		}
		f := p.cleanups[n-1]
		p.cleanups = p.cleanups[:n-1]
		p.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					p.Logf("cleanup panicked: %v", r)
				}
			}()
			f()
		}()
	}
}

func (p *ProcessTB) Error(args ...any) { p.Log(append([]any{"ERROR: "}, args...)...); p.Fail() }
func (p *ProcessTB) Errorf(format string, args ...any) {
	p.Logf("ERROR: "+format, args...)
	p.Fail()
}
func (p *ProcessTB) Fail() {
	p.mu.Lock()
	p.failed = true
	p.mu.Unlock()
}
func (p *ProcessTB) FailNow() { p.Fail(); panic(fatalError{msg: "FailNow called"}) }
func (p *ProcessTB) Failed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.failed
}
func (p *ProcessTB) Fatal(args ...any) {
	msg := fmt.Sprint(args...)
	p.Log("FATAL: " + msg)
	p.Fail()
	panic(fatalError{msg: msg})
}
func (p *ProcessTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.Log("FATAL: " + msg)
	p.Fail()
	panic(fatalError{msg: msg})
}
func (p *ProcessTB) Helper() {}
func (p *ProcessTB) Log(args ...any) {
	s := fmt.Sprintln(args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.out, s)
}
func (p *ProcessTB) Logf(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	if len(s) == 0 || s[len(s)-1] != '\n' {
		s += "\n"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = io.WriteString(p.out, s)
}
func (p *ProcessTB) Name() string { return p.name }
func (p *ProcessTB) Setenv(key, value string) {
	old, had := os.LookupEnv(key)
	if err := os.Setenv(key, value); err != nil {
		p.Fatalf("setenv %s: %v", key, err)
	}
	p.Cleanup(func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	})
}
func (p *ProcessTB) Skip(args ...any)                 { p.Fatal(append([]any{"skip: "}, args...)...) }
func (p *ProcessTB) Skipf(format string, args ...any) { p.Fatalf("skip: "+format, args...) }
func (p *ProcessTB) SkipNow()                         { p.Fatal("skip") }
func (p *ProcessTB) Skipped() bool                    { return false }

// TempDir creates a fresh directory that is removed by RunCleanups.
func (p *ProcessTB) TempDir() string {
	dir, err := os.MkdirTemp("", p.name+"-")
	if err != nil {
		p.Fatalf("TempDir: %v", err)
	}
	p.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
