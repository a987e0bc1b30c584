#!/usr/bin/env bash
# The main job: builds waterline, starts a collector with a synthetic cluster (no
# Kubernetes, no Prometheus) and a scorer streaming from it, shows a real Score answer,
# and prints kubectl-waterline and grpcurl commands to try. Ctrl-C stops both.
#
# Environment: NODES (default 50), GRPC_PORT (50051), COLLECTOR_PORT (50052).
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-50}
GRPC_PORT=${GRPC_PORT:-50051}
COLLECTOR_PORT=${COLLECTOR_PORT:-50052}

step() { printf '\n==> %s\n' "$*"; }

step "building waterline (first build takes a few minutes)"
cargo build --release --bins -p waterline-collector -p waterline-scorer -p waterline-cli
GRPCURL=$(scripts/deps/grpcurl.sh)

logs=$(mktemp -d)
cleanup() {
    kill "${collector_pid:-}" "${scorer_pid:-}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

step "starting waterline-collector with a synthetic cluster of $NODES nodes (log: $logs/collector.log)"
target/release/waterline-collector --synthetic-nodes "$NODES" \
    --grpc-addr "127.0.0.1:$COLLECTOR_PORT" --admin-addr 127.0.0.1:9102 >"$logs/collector.log" 2>&1 &
collector_pid=$!

step "starting waterline-scorer (log: $logs/scorer.log)"
target/release/waterline-scorer --collector-url "http://127.0.0.1:$COLLECTOR_PORT" \
    --grpc-addr "127.0.0.1:$GRPC_PORT" --admin-addr 127.0.0.1:9101 >"$logs/scorer.log" 2>&1 &
scorer_pid=$!

for _ in $(seq 1 100); do
    if curl -fsS 127.0.0.1:9101/ready >/dev/null 2>&1; then break; fi
    sleep 0.1
done
curl -fsS 127.0.0.1:9101/ready >/dev/null || { echo "scorer did not become ready; see $logs/scorer.log" >&2; exit 1; }

score_request='{"pod": {"namespace": "default", "name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000, "memory_request_bytes": 4294967296}, "node_names": ["synthetic-00000", "synthetic-00001", "synthetic-00002", "synthetic-00003"], "explain": false}'

step "a Score call for a 2-CPU / 4 GiB pod over four nodes (water level 40 %):"
"$GRPCURL" -plaintext -emit-defaults -d "$score_request" "127.0.0.1:$GRPC_PORT" waterline.v1.ScorerService/Score

cat <<MSG

==> waterline is running. Try (kubectl-waterline is also built as plain \`waterline\`):

  target/release/kubectl-waterline --scorer 127.0.0.1:$GRPC_PORT --collector 127.0.0.1:$COLLECTOR_PORT top
  target/release/kubectl-waterline --scorer 127.0.0.1:$GRPC_PORT explain --cpu 2 --memory 4Gi --limit 3
  target/release/kubectl-waterline --collector 127.0.0.1:$COLLECTOR_PORT ledger synthetic-00001

or the raw gRPC calls (grpcurl is at $GRPCURL):

  $GRPCURL -plaintext 127.0.0.1:$GRPC_PORT list
  $GRPCURL -plaintext 127.0.0.1:$GRPC_PORT describe waterline.v1.ScorerService
  $GRPCURL -plaintext -emit-defaults -d '{"pod": {"name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000}, "node_names": ["synthetic-00000", "synthetic-00001"], "explain": true}' 127.0.0.1:$GRPC_PORT waterline.v1.ScorerService/Score
  $GRPCURL -plaintext -d '{"pod": {"name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000}, "node_names": ["synthetic-00000", "synthetic-00001"], "scores_only": true}' 127.0.0.1:$GRPC_PORT waterline.v1.ScorerService/Score
  $GRPCURL -plaintext -d '{"pod": {"name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000}, "node_names": ["synthetic-00000", "synthetic-00001", "synthetic-00002"]}' 127.0.0.1:$GRPC_PORT waterline.v1.ScorerService/Filter
  $GRPCURL -plaintext -d '{"pod": {"name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000}, "all_nodes": true}' 127.0.0.1:$GRPC_PORT waterline.v1.ScorerService/Filter
  $GRPCURL -plaintext -d '{"pod": {"name": "web-1", "uid": "demo-1", "cpu_request_millis": 2000}, "node_name": "synthetic-00001"}' 127.0.0.1:$GRPC_PORT waterline.v1.ScorerService/Reserve
  $GRPCURL -plaintext -d '{"node_names": ["synthetic-00001"]}' 127.0.0.1:$COLLECTOR_PORT waterline.v1.CollectorService/ListNodes
  $GRPCURL -plaintext -d '{"service": "waterline.v1.ScorerService"}' 127.0.0.1:$GRPC_PORT grpc.health.v1.Health/Check
  curl -s 127.0.0.1:9101/metrics | grep ^waterline_

Press Ctrl-C to stop.
MSG
wait "$scorer_pid"
