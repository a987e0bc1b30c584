#!/usr/bin/env bash
# A venv at .tools/venv with the offline checkers the tests use: buf (proto lint) and
# kubernetes-validate (manifest schemas). Both come from PyPI as wheels with everything
# inside; nothing is downloaded at run time.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=.tools/venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
want=("buf-bin==1.75.0" "kubernetes-validate==1.37.0")
missing=()
for pkg in "${want[@]}"; do
    "$venv/bin/python" -m pip show "${pkg%%==*}" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]} into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "${missing[@]}"
fi
