#!/usr/bin/env bash
# Installs VictoriaMetrics single-node from Debian's package (victoria-metrics 1.79.x on
# bookworm) when it is missing; the package also ships vmalert, which the tests use to
# evaluate the recording rules against it. Idempotent: does nothing when both are on PATH.
# apt does not start the service (no systemd; policy-rc.d denies, and the postinst's
# "invoke-rc.d ... start" failing that way is not an install failure); the tests start
# /usr/bin/victoria-metrics and /usr/bin/vmalert themselves as child processes.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1; }

if have victoria-metrics && have vmalert; then
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
else
    SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
# One `apt-get update` per machine is enough: skip it when the package is already known
# (scripts/deps/prometheus.sh, run just before, usually did it).
if ! apt-cache show victoria-metrics >/dev/null 2>&1; then
    $SUDO apt-get update -q
fi
$SUDO apt-get install -y -q --no-install-recommends victoria-metrics

for bin in victoria-metrics vmalert; do
    if ! have "$bin"; then
        echo "scripts/deps/victoria-metrics.sh: $bin still missing after apt-get install" >&2
        exit 1
    fi
done
# The Debian build's -version prints nothing; name the package's version instead.
dpkg-query -W -f='${Package} ${Version}\n' victoria-metrics
