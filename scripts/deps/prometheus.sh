#!/usr/bin/env bash
# Installs the Prometheus server and promtool from Debian's package (prometheus 2.42.x on
# bookworm) when either is missing. Idempotent: does nothing when both are on PATH.
# apt does not start the service (no systemd, policy-rc.d denies); the tests start
# /usr/bin/prometheus themselves as a child process.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have prometheus && have promtool; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends prometheus

for bin in prometheus promtool; do
    if ! have "$bin"; then
        echo "scripts/deps/prometheus.sh: $bin still missing after apt-get install" >&2
        exit 1
    fi
done
prometheus --version 2>&1 | head -n 1
