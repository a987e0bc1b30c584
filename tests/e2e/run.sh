#!/usr/bin/env bash
# CI entry for the end-to-end tier: a real etcd + kube-apiserver + kube-scheduler
# (in-process, tests/e2e/harness), a real Prometheus scraping a fake
# node-exporter, and the real waterline binaries as child processes.
#
#   tests/e2e/run.sh                 # every Test in tests/e2e (~7-9 min on 2 busy cores)
#   tests/e2e/run.sh -run TestBurst  # extra args go to `go test` (after the defaults)
#
# Expects the Rust binaries already built (cargo build --workspace --bins) in
# $WATERLINE_BIN_DIR, default <repo>/target/debug (set it to target/release to
# measure release builds). Exits non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export WATERLINE_BIN_DIR="${WATERLINE_BIN_DIR:-$root/target/debug}"
step() { echo "e2e: [$(date -u +%H:%M:%S)] $*"; }

step "checking waterline binaries in $WATERLINE_BIN_DIR"
missing=0
for b in waterline-collector waterline-scorer waterline-extender; do
    if [ ! -x "$WATERLINE_BIN_DIR/$b" ]; then
        echo "e2e: missing $WATERLINE_BIN_DIR/$b — build first: (cd $root && cargo build --workspace --bins)" >&2
        missing=1
    fi
done
[ "$missing" -eq 0 ] || exit 2

step "ensuring Prometheus (scripts/deps/prometheus.sh)"
"$root/scripts/deps/prometheus.sh"

step "building the control-plane harness (tests/e2e/build.sh; cached, a cold build takes ~20 min)"
"$here/build.sh"

step "go test (scenarios on the extender and the plugin path: hot node, burst/ledger, water level, anti-colocation, failure, faults during a burst; throughput none/extender/plugin)"
cd "$here"
start=$(date +%s)
set +e
mkdir -p "$here/results"
log="$here/results/go-test.log"   # the full output (klog, process log tails on failure)
# -p 1: stream the output as it happens (go test buffers a package list otherwise);
# there is one control plane per process anyway.
go test -p 1 -count=1 -timeout 30m -run 'Test' -v "$@" ./... 2>&1 | tee "$log" | \
    grep --line-buffered -E '^(=== RUN|--- |PASS|FAIL|ok |panic)|^\s+--- |^\s+[a-z_]+_test\.go:'
rc=${PIPESTATUS[0]}
set -e
step "go test finished in $(( $(date +%s) - start ))s with exit code $rc (full log: $log)"
if [ -f "$here/results/throughput.txt" ]; then
    step "throughput (tests/e2e/results/throughput.txt):"
    cat "$here/results/throughput.txt"
fi
exit "$rc"
