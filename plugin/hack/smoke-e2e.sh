#!/usr/bin/env bash
# Smoke run of the plugin path on a real control plane, all on loopback:
#   tests/e2e harness (etcd + kube-apiserver, no scheduler) + 5 fake nodes
#   + waterline-collector (--static usage) + waterline-scorer
#   + plugin/bin/kube-scheduler with config/scheduler-config.yaml (kubeconfig, endpoint and
#     leader election adapted).
# Checks: a hot node is filtered out; each pod lands on a node the Score RPC ranks best at
# that moment; the collector's ledger holds a Reserve entry for every pod; with the scorer
# killed, pods are still scheduled (fail-open).
#
# Needs: tests/e2e/bin/waterline-e2e-cluster (tests/e2e/build.sh), target/debug/
# waterline-collector and waterline-scorer (cargo build), kubectl, and builds
# plugin/bin/kube-scheduler and plugin/bin/probe when missing.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cluster_bin="${root}/tests/e2e/bin/waterline-e2e-cluster"
collector_bin="${root}/target/debug/waterline-collector"
scorer_bin="${root}/target/debug/waterline-scorer"
for b in "${cluster_bin}" "${collector_bin}" "${scorer_bin}"; do
  [[ -x "$b" ]] || { echo "missing $b (see the header of this script)" >&2; exit 2; }
done
command -v kubectl >/dev/null || { echo "kubectl not found" >&2; exit 2; }
(cd "${root}/plugin" && { [[ -x bin/kube-scheduler ]] || go build -o bin/kube-scheduler ./cmd/kube-scheduler; } \
  && go build -o bin/probe ./hack/probe)
probe="${root}/plugin/bin/probe"

# Loopback ports away from the services' defaults, so a developer's running stack is left alone.
SCORER=127.0.0.1:50161 COLLECTOR=127.0.0.1:50162
work="$(mktemp -d)"
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[i]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ "${KEEP_WORK:-}" == 1 ]]; then echo "logs kept in ${work}" >&2; else rm -rf "${work}"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; echo "logs: ${work} (kept)" >&2; KEEP_WORK=1; exit 1; }

export KUBECONFIG="${work}/kubeconfig"
"${cluster_bin}" --kubeconfig-out "${KUBECONFIG}" >"${work}/cluster.out" 2>"${work}/cluster.err" &
pids+=($!)
for _ in $(seq 120); do grep -q '^READY$' "${work}/cluster.out" 2>/dev/null && break; sleep 0.5; done
grep -q '^READY$' "${work}/cluster.out" || fail "control plane did not come up"
"${cluster_bin}" nodes --kubeconfig "${KUBECONFIG}" --count 5 --cpu 8 --memory 32Gi --ip-prefix 127.0.1. >/dev/null

# node-0 is hot (above the 65 % filter threshold); the others sit at different levels.
{
  echo "nodes:"
  for nv in node-0:80 node-1:30 node-2:10 node-3:50 node-4:5; do
    echo "  - name: ${nv%%:*}"
    echo "    capacity: {cpu: 8, memory: 32Gi}"
    echo "    metrics:"
    for m in cpu_usage_avg_5m cpu_usage_max_avg_1h cpu_usage_max_avg_1d mem_usage_avg_5m mem_usage_max_avg_1h mem_usage_max_avg_1d; do
      echo "      ${m}: ${nv##*:}"
    done
  done
} >"${work}/nodes.yaml"
"${collector_bin}" --grpc-addr "${COLLECTOR}" --admin-addr 127.0.0.1:9202 --static "${work}/nodes.yaml" >"${work}/collector.log" 2>&1 &
pids+=($!)
"${scorer_bin}" --grpc-addr "${SCORER}" --admin-addr 127.0.0.1:9201 --collector-url "http://${COLLECTOR}" >"${work}/scorer.log" 2>&1 &
pids+=($!)
scorer_pid=$!
for _ in $(seq 60); do curl -sf 127.0.0.1:9201/ready >/dev/null 2>&1 && break; sleep 0.5; done
curl -sf 127.0.0.1:9201/ready >/dev/null || fail "scorer not ready"

sed -e "s#kubeconfig: \"\"#kubeconfig: ${KUBECONFIG}#" -e 's#leaderElect: true#leaderElect: false#' \
  -e "s#endpoint: waterline-scorer.waterline.svc:50051#endpoint: ${SCORER}#" \
  "${root}/plugin/config/scheduler-config.yaml" >"${work}/scheduler.yaml"
"${root}/plugin/bin/kube-scheduler" --config "${work}/scheduler.yaml" --secure-port 0 --v=2 >"${work}/scheduler.log" 2>&1 &
pids+=($!)

nodes=(node-0 node-1 node-2 node-3 node-4)
create_pod() {
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  schedulerName: waterline-scheduler
  containers:
  - {name: c, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}
POD
}
bound_node() {
  for _ in $(seq 100); do
    node="$(kubectl get pod "$1" -o jsonpath='{.spec.nodeName}' 2>/dev/null || true)"
    [[ -n "${node}" ]] && { echo "${node}"; return; }
    sleep 0.2
  done
  fail "pod $1 was not scheduled"
}

for i in 1 2 3 4 5 6 7 8; do
  # What the scorer says right now, for a pod of the same size: the pod must go to one of
  # the best nodes (in-tree scores are equal on these identical nodes).
  answer="$("${probe}" score "${SCORER}" 500 $((512 << 20)) "${nodes[@]}")"
  best="$(sed -n 's/^best //p' <<<"${answer}")"
  grep -q '^rejected node-0 ' <<<"${answer}" || fail "node-0 should be rejected: ${answer}"
  create_pod "p${i}"
  node="$(bound_node "p${i}")"
  [[ " ${best} " == *" ${node} "* ]] || fail "p${i} on ${node}, but the Score RPC ranked best: ${best}"
  echo "p${i} -> ${node} (best: ${best})"
done

ledger="$("${probe}" ledger "${COLLECTOR}")"
for i in 1 2 3 4 5 6 7 8; do
  uid="$(kubectl get pod "p${i}" -o jsonpath='{.metadata.uid}')"
  grep -q "uid=${uid} .*source=LEDGER_SOURCE_RESERVE" <<<"${ledger}" || fail "no Reserve ledger entry for p${i}: ${ledger}"
done
echo "ledger: a Reserve entry for each of the 8 pods"

kill "${scorer_pid}"
create_pod p-failopen
node="$(bound_node p-failopen)"
grep -q 'failing open' "${work}/scheduler.log" || fail "no fail-open log line"
echo "scorer down: p-failopen -> ${node} (fail-open)"
echo "smoke-e2e: PASS"
