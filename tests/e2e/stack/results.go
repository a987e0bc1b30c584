package stack

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// ResultsDir is tests/e2e/results (git-ignored): the numbers and logs a run leaves.
func ResultsDir() string { return filepath.Join(RepoRoot(), "tests", "e2e", "results") }

var (
	resultsMu   sync.Mutex
	resultsSeen = map[string]bool{}
)

// WriteResult writes ResultsDir()/name; a failure to write is logged, not fatal.
func WriteResult(t testing.TB, name, text string) {
	if err := os.MkdirAll(ResultsDir(), 0o755); err != nil {
		t.Logf("results dir: %v", err)
		return
	}
	if err := os.WriteFile(filepath.Join(ResultsDir(), name), []byte(text), 0o644); err != nil {
		t.Logf("write result: %v", err)
	}
}

// AppendResult appends to ResultsDir()/name, truncating it first when it is the first
// write of this test process (one file per run, both paths).
func AppendResult(t testing.TB, name, text string) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if !resultsSeen[name] {
		resultsSeen[name] = true
		WriteResult(t, name, text)
		return
	}
	f, err := os.OpenFile(filepath.Join(ResultsDir(), name), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Logf("write result: %v", err)
		return
	}
	defer f.Close()
	_, _ = f.WriteString(text)
}
