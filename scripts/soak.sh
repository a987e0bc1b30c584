#!/usr/bin/env bash
# The soak of RELIABILITY.md and BENCHMARKS.md: a spawned collector (5,000 synthetic
# nodes), scorer and extender under a steady load of gRPC Score, extender filter +
# prioritize and Reserve/Unreserve churn for DURATION (default 10m), RSS and CPU of each
# sampled every 10 s. Fails unless RSS per live ledger entry and per node stay within 10 %
# after the warm-up. Progress lines on stdout; the samples (CSV), the result (JSON) and the
# services' logs go to target/soak/<time>/.
#
#   scripts/soak.sh                      # 10 minutes, release binaries (built if missing)
#   DURATION=2m BIN_DIR=target/debug scripts/soak.sh
#   scripts/soak.sh --reserve-rate 200   # extra flags go to `waterline-bench soak`
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10m}
BIN_DIR=${BIN_DIR:-target/release}
out=target/soak/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"

if [ "$BIN_DIR" = target/release ] && [ "${SKIP_BUILD:-0}" != 1 ]; then
    CARGO_INCREMENTAL=0 cargo build --release --bins --locked
fi
echo "soak: $DURATION, binaries from $BIN_DIR, output in $out; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN_DIR/waterline-bench" soak --spawn --bin-dir "$BIN_DIR" --duration "$DURATION" --no-progress \
    --log-dir "$out/logs" --csv "$out/samples.csv" --json-out "$out/result.json" "$@" \
    | tee "$out/summary.txt"
