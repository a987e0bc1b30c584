#!/usr/bin/env bash
# Builds the e2e control-plane harness into tests/e2e/bin/.
# Idempotent; uses Go's module and build caches (a warm rebuild takes seconds).
# Usage: [EXTRA_LDFLAGS="-s -w"] tests/e2e/build.sh [extra go build flags, not -ldflags]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

need="1.26"   # go directive of k8s.io/kubernetes v1.37.x
have="$(go env GOVERSION 2>/dev/null | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')"
if [ -z "${GOTOOLCHAIN:-}" ] && [ -n "$have" ] && \
   [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | head -n1)" != "$need" ]; then
  # Local Go is older than required: let the go command fetch a newer toolchain.
  export GOTOOLCHAIN="go${need}.0"
  echo "build.sh: local Go $have < $need, using GOTOOLCHAIN=$GOTOOLCHAIN"
fi

# NOTE: do not pass -trimpath: kube-apiserver's StartTestServer resolves its
# package dir with runtime.Caller and fails on a non-absolute path.
mkdir -p bin
echo "build.sh: $(go version)"
echo "build.sh: go mod download (no-op when cached)..."
start=$(date +%s)
go mod download
echo "build.sh: go build ./cmd/waterline-e2e-cluster -> bin/waterline-e2e-cluster (a cold build compiles kube-apiserver + kube-scheduler: about 20 min on 2 busy cores)..."
# Stamp the Kubernetes version (unstamped, /version reports
# "v0.0.0-master+$Format:%H$" and `kubectl version` fails to parse it).
# -X only affects the link step, so this costs no recompilation.
kver="$(go list -m -f '{{.Version}}' k8s.io/kubernetes)"   # e.g. v1.37.2
kmaj="$(echo "$kver" | sed -E 's/^v([0-9]+)\..*/\1/')"
kmin="$(echo "$kver" | sed -E 's/^v[0-9]+\.([0-9]+)\..*/\1/')"
vpkg=k8s.io/component-base/version
ldflags="-X ${vpkg}.gitVersion=${kver} -X ${vpkg}.gitMajor=${kmaj} -X ${vpkg}.gitMinor=${kmin} -X ${vpkg}.gitTreeState=clean ${EXTRA_LDFLAGS:-}"
go build -ldflags "$ldflags" "$@" -o bin/waterline-e2e-cluster ./cmd/waterline-e2e-cluster
echo "build.sh: done in $(( $(date +%s) - start ))s: $(pwd)/bin/waterline-e2e-cluster"
