package stack

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

const (
	// SchedulerName is the profile of the waterline scheduler in every generated
	// scheduler configuration; NewPod's pods ask for it.
	SchedulerName = "waterline-scheduler"
	// SpreadKey is the anti-colocation label of every generated policy.
	SpreadKey = "waterline.io/spread-group"
)

// NodeName is the name of the i-th fake node.
func NodeName(i int) string { return "node-" + strconv.Itoa(i) }

// IPPrefix is the InternalIP prefix of a cluster of nodes fake nodes: 127.0.1.x for up
// to 250 nodes, 127.1.x.y above (harness.NodeIP).
func IPPrefix(nodes int) string {
	if nodes > 250 {
		return "127.1."
	}
	return "127.0.1."
}

// RepoRoot is the repository's root, three levels above this package's directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BinDir holds the waterline binaries: WATERLINE_BIN_DIR, else <repo>/target/debug.
func BinDir() string {
	if d := os.Getenv("WATERLINE_BIN_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "target", "debug")
}

// NeedBinary is the path of the waterline binary name in BinDir; it fails t when the
// binary is missing.
func NeedBinary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(BinDir(), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s not found (%v): build the Rust binaries first (cargo build --workspace --bins) or set WATERLINE_BIN_DIR", p, err)
	}
	return p
}

var helpCache sync.Map

// binaryHasFlag reports whether `<bin> --help` mentions flag (e.g. "--kubeconfig").
func binaryHasFlag(t testing.TB, name, flag string) bool {
	t.Helper()
	key := name + " " + flag
	if v, ok := helpCache.Load(key); ok {
		return v.(bool)
	}
	out, _ := exec.Command(NeedBinary(t, name), "--help").CombinedOutput()
	has := regexp.MustCompile(regexp.QuoteMeta(flag) + `\b`).Match(out)
	helpCache.Store(key, has)
	return has
}

// FreeAddr is a free 127.0.0.1 host:port (picked by the kernel, then released).
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// EnvInt is the positive integer in the environment variable name, else def.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
