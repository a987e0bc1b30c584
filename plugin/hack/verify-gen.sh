#!/usr/bin/env bash
# Regenerates the Go stubs (plugin/gen) from proto/ with buf.gen.yaml into a temporary
# directory and fails if they differ from the checked-in ones, so a .proto change cannot land
# without its stubs. `--update` writes the fresh stubs into plugin/gen instead.
#
# The generators are pinned below and installed into plugin/bin/tools when missing or at
# another version (protoc-gen-go, protoc-gen-go-grpc with `go install`; buf from PyPI's
# buf-bin, a prebuilt binary, falling back to `go install`, which takes minutes).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.11
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
BUF_VERSION=1.75.0

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
tools="${root}/plugin/bin/tools"
mkdir -p "${tools}"
export PATH="${tools}:${PATH}"

# has TOOL VERSION: the tool in plugin/bin/tools reports exactly this version.
has() {
  [[ -x "${tools}/$1" ]] && "${tools}/$1" --version 2>/dev/null | grep -qw -- "$2"
}

if ! has protoc-gen-go "${PROTOC_GEN_GO_VERSION}"; then
  echo "installing protoc-gen-go ${PROTOC_GEN_GO_VERSION}" >&2
  GOBIN="${tools}" go install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}"
fi
if ! has protoc-gen-go-grpc "${PROTOC_GEN_GO_GRPC_VERSION#v}"; then
  echo "installing protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION}" >&2
  GOBIN="${tools}" go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}"
fi
if ! has buf "${BUF_VERSION}"; then
  echo "installing buf ${BUF_VERSION}" >&2
  pipdir="$(mktemp -d)"
  if python3 -m pip install --quiet --disable-pip-version-check --target "${pipdir}" "buf-bin==${BUF_VERSION}" 2>/dev/null \
      && [[ -x "${pipdir}/bin/buf" ]]; then
    cp "${pipdir}/bin/buf" "${tools}/buf"
  else
    GOBIN="${tools}" go install "github.com/bufbuild/buf/cmd/buf@v${BUF_VERSION}"
  fi
  rm -rf "${pipdir}"
fi

cd "${root}"
if [[ "${1:-}" == "--update" ]]; then
  rm -rf plugin/gen
  buf generate --template buf.gen.yaml
  echo "plugin/gen regenerated" >&2
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
# -o prefixes every plugin's out: the stubs land in ${tmp}/plugin/gen.
buf generate --template buf.gen.yaml -o "${tmp}"
if ! diff -ru plugin/gen "${tmp}/plugin/gen"; then
  echo "plugin/gen is stale: run plugin/hack/verify-gen.sh --update and commit the result" >&2
  exit 1
fi
echo "plugin/gen is up to date"
