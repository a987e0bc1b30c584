#!/usr/bin/env bash
# Installs grpcurl into .tools/bin with `go install` (from the Go module proxy) when it is
# missing. Prints the path of the binary.
set -euo pipefail
cd "$(dirname "$0")/../.."
GRPCURL_VERSION=v1.9.3
bin="$PWD/.tools/bin/grpcurl"
if [ -x "$bin" ]; then
    echo "$bin"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    echo "grpcurl: Go is needed to install grpcurl (go install)" >&2
    exit 1
fi
echo "installing grpcurl $GRPCURL_VERSION into .tools/bin (first time only, ~1-3 min)..." >&2
GOBIN="$PWD/.tools/bin" go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$GRPCURL_VERSION" >&2
echo "$bin"
