#!/usr/bin/env bash
# Runs waterline's benchmarks and writes raw results plus a summary of medians to
# target/bench/<UTC time>/, then takes the medians into the committed result files
# (bench/results/*.json, `waterline-bench record`) and regenerates BENCHMARKS.md's table.
# Timing targets are compared in BENCHMARKS.md, never in tests.
#
#   scripts/bench.sh                 # everything, RUNS=3 repetitions of each measurement
#   ONLY="rpc extender" scripts/bench.sh
#   RUNS=5 DURATION=10s scripts/bench.sh
#   SKIP_BUILD=1 scripts/bench.sh    # use the release binaries already in target/release
#   scripts/bench.sh --table         # only BENCHMARKS.md's table, from bench/results/ (runs nothing)
#
# Sections (ONLY=...): criterion rpc session extender footprint prometheus
# Loopback only. The machine should be otherwise idle: check `uptime` first.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ "${1:-}" == "--table" ]]; then
  exec cargo run --quiet -p waterline-bench -- table
fi

RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
NODES=${NODES:-5000}
FOOTPRINT_WINDOW=${FOOTPRINT_WINDOW:-30s}
ONLY=${ONLY:-"criterion rpc session extender footprint prometheus"}
OUT=${OUT:-target/bench/$(date -u +%Y%m%dT%H%M%SZ)}
BIN=target/release
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

want() { [[ " $ONLY " == *" $1 "* ]]; }
say() { printf '\n=== %s (%s, load %s)\n' "$*" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "memory: $(grep MemTotal /proc/meminfo | awk '{printf "%.1f GiB", $2/1048576}')"
  echo "kernel: $(uname -r)"
  echo "rustc: $(rustc --version)"
  echo "uptime at start: $(uptime)"
} | tee "$OUT/machine.txt"

if [[ -z "${SKIP_BUILD:-}" ]]; then
  say "building release binaries"
  packages=(-p waterline-collector -p waterline-scorer -p waterline-bench)
  [[ -f extender/Cargo.toml ]] && packages+=(-p waterline-extender)
  cargo build --release "${packages[@]}"
fi

PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_ready() { # admin-port name
  for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$1/ready" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "$2 not ready; log: $OUT/$2.log" >&2; tail -20 "$OUT/$2.log" >&2; return 1
}

# A synthetic collector with $NODES nodes and a scorer streaming from it, started once for
# the RPC and extender sections.
start_stack() {
  CG=$(free_port); CA=$(free_port); SG=$(free_port); SA=$(free_port)
  "$BIN/waterline-collector" --grpc-addr "127.0.0.1:$CG" --admin-addr "127.0.0.1:$CA" \
    --synthetic-nodes "$NODES" >"$OUT/waterline-collector.log" 2>&1 &
  PIDS+=($!)
  wait_ready "$CA" waterline-collector
  "$BIN/waterline-scorer" --grpc-addr "127.0.0.1:$SG" --admin-addr "127.0.0.1:$SA" \
    --collector-url "http://127.0.0.1:$CG" >"$OUT/waterline-scorer.log" 2>&1 &
  PIDS+=($!)
  wait_ready "$SA" waterline-scorer
  SCORER="http://127.0.0.1:$SG"; SCORER_ADMIN="http://127.0.0.1:$SA"
}

B() { "$BIN/waterline-bench" --no-progress "$@"; }

if want criterion; then
  say "criterion: core engine (Filter, Score, snapshot apply), $RUNS runs"
  for run in $(seq 1 "$RUNS"); do
    cargo bench -p waterline-core --bench engine -- --warm-up-time 1 --measurement-time 3 \
      --noplot 2>&1 | tee "$OUT/criterion-$run.txt" | grep -E '^[a-z_]+/[0-9]+ +time' || true
    # criterion keeps its estimates per bench (group/size or group/function/size); copy this
    # run's medians.
    python3 - "$OUT/criterion.jsonl" "$run" <<'PY'
import glob, json, os, sys
out, run = sys.argv[1], int(sys.argv[2])
with open(out, "a") as f:
    for path in sorted(glob.glob("target/criterion/**/new/estimates.json", recursive=True)):
        bench = os.path.relpath(os.path.dirname(os.path.dirname(path)), "target/criterion")
        if "report" in bench.split(os.sep):
            continue
        est = json.load(open(path))
        f.write(json.dumps({"run": run, "bench": bench.replace(os.sep, "/"),
                            "median_ns": est["median"]["point_estimate"]}) + "\n")
PY
  done
fi

if want rpc || want extender; then
  start_stack
fi

if want rpc; then
  say "RPC: Score with 100 candidates on $NODES nodes"
  for c in 1 8 32 64; do
    for run in $(seq 1 "$RUNS"); do
      B score --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
        --nodes 100 -c "$c" --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "score-100-c$c"
    done
  done
  say "RPC: Score over all $NODES candidates (latency)"
  for c in 1 2; do
    for run in $(seq 1 "$RUNS"); do
      B score --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
        --nodes "$NODES" -c "$c" --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "score-$NODES-c$c"
    done
  done
  say "RPC: Score answers with names vs scores_only (what the extender and the plugin ask), c=1"
  for n in 100 "$NODES"; do
    for run in $(seq 1 "$RUNS"); do
      B score --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
        --nodes "$n" -c 1 --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "score-$n-names-c1"
      B score --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
        --nodes "$n" -c 1 --scores-only --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "score-$n-scores-only-c1"
    done
  done
  say "RPC: Filter with 100 candidates"
  for run in $(seq 1 "$RUNS"); do
    B filter --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
      --nodes 100 -c 32 --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "filter-100-c32"
  done
  say "RPC: Filter of all $NODES nodes, by name vs all_nodes (the plugin's PreFilter), c=1"
  for run in $(seq 1 "$RUNS"); do
    B filter --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
      --nodes "$NODES" -c 1 --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "filter-$NODES-names-c1"
    B filter --scorer-url "$SCORER" --scorer-admin "$SCORER_ADMIN" --cluster-nodes "$NODES" \
      --all-nodes -c 1 --duration "$DURATION" --json-out "$OUT/rpc.jsonl" --label "filter-$NODES-all-nodes-c1"
  done
fi

if want session; then
  say "session: the plugin's Session round trip (Reserve written, then Evaluate of all $NODES nodes), c=1"
  for run in $(seq 1 "$RUNS"); do
    B session --spawn --bin-dir "$BIN" --cluster-nodes "$NODES" -c 1 --duration "$DURATION" \
      --json-out "$OUT/session.jsonl" --label "session-$NODES"
    B session --spawn --bin-dir "$BIN" --cluster-nodes "$NODES" -c 1 --duration "$DURATION" \
      --policy bench/policies/no-filter.yaml --json-out "$OUT/session.jsonl" --label "session-$NODES-no-filter"
  done
fi

if want extender; then
  if [[ -x "$BIN/waterline-extender" ]]; then
    say "extender: prioritize with 500 names vs gRPC Score with the same 500 names"
    EH=$(free_port); EA=$(free_port)
    # No provisional Reserve after each prioritize: it would share the cores with the
    # measured call (BENCHMARKS.md, the extender overhead).
    "$BIN/waterline-extender" --http-addr "127.0.0.1:$EH" --admin-addr "127.0.0.1:$EA" \
      --scorer-url "$SCORER" --provisional-reserve=false >"$OUT/waterline-extender.log" 2>&1 &
    PIDS+=($!)
    wait_ready "$EA" waterline-extender
    for c in 1 8; do
      for run in $(seq 1 "$RUNS"); do
        B extender-prioritize --extender-url "http://127.0.0.1:$EH" --compare-grpc \
          --scorer-url "$SCORER" --cluster-nodes "$NODES" --nodes 500 -c "$c" \
          --duration "$DURATION" --json-out "$OUT/extender.jsonl" --label "prioritize-500-c$c"
      done
    done
    for run in $(seq 1 "$RUNS"); do
      B extender-filter --extender-url "http://127.0.0.1:$EH" --compare-grpc \
        --scorer-url "$SCORER" --cluster-nodes "$NODES" --nodes 500 -c 1 \
        --duration "$DURATION" --json-out "$OUT/extender.jsonl" --label "filter-500-c1"
    done
  else
    say "extender: $BIN/waterline-extender not built; skipped"
  fi
fi

cleanup; PIDS=()

if want footprint; then
  say "footprint: RSS with $NODES nodes and 50,000 ledger entries; collector CPU per refresh"
  for run in $(seq 1 "$RUNS"); do
    B footprint --spawn --bin-dir "$BIN" --cluster-nodes "$NODES" --reserves 50000 --concurrency 256 \
      --duration "$FOOTPRINT_WINDOW" --log-dir "$OUT/footprint-$run" --json-out "$OUT/footprint.jsonl" --label footprint
    B footprint --spawn --bin-dir "$BIN" --cluster-nodes "$NODES" --reserves 50000 --concurrency 256 \
      --duration "$FOOTPRINT_WINDOW" --collector-shadow --log-dir "$OUT/footprint-shadow-$run" \
      --json-out "$OUT/footprint.jsonl" --label footprint-shadow
  done
fi

if want prometheus; then
  say "prometheus: collector refresh against a real Prometheus with $NODES nodes"
  if ls collector/src/sources/prometheus* >/dev/null 2>&1 && "$BIN/waterline-collector" --help | grep -q -- --prometheus-url; then
    if "$BIN/waterline-bench" --help | grep -q prometheus-refresh; then
      for run in $(seq 1 "$RUNS"); do
        B prometheus-refresh --bin-dir "$BIN" --cluster-nodes "$NODES" \
          --json-out "$OUT/prometheus.jsonl" --label prometheus
      done
    else
      echo "pending: waterline-bench has no prometheus-refresh subcommand yet (see BENCHMARKS.md)"
    fi
  else
    echo "pending: the collector's Prometheus source is not built"
  fi
fi

say "summary (medians over $RUNS runs)"
python3 bench/summary.py "$OUT" | tee "$OUT/summary.md"
echo "raw results: $OUT"

say "bench/results/: this run's medians, and BENCHMARKS.md's table"
"$BIN/waterline-bench" record --run "$OUT"
"$BIN/waterline-bench" table
echo "review with: git diff bench/results/ BENCHMARKS.md"
