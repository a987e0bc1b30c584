#!/usr/bin/env bash
# Offline manifest checks for deploy/.
#
#   scripts/deps/manifests.sh          install kubernetes-validate==1.37.0 (PyPI) into
#                                      .tools/venv when missing; nothing else
#   scripts/deps/manifests.sh --check  also render `kubectl kustomize deploy/` and validate
#                                      every object against the Kubernetes 1.33 schemas
#                                      (--strict: unknown fields are errors), plus
#                                      deploy/examples/*.yaml
#
# Objects without a bundled schema are parsed and shape-checked here instead of skipped
# silently: the PrometheusRule (CRD) and the KubeSchedulerConfiguration inside its ConfigMap.
# The KubeSchedulerConfiguration and the policy are also decoded field by field by
# `cargo test -p waterline-extender --test deploy`.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.tools/venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
installed="$("$venv/bin/python" -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p')"
if [ "$installed" != "1.37.0" ]; then
    echo "installing kubernetes-validate==1.37.0 into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "kubernetes-validate==1.37.0"
fi
[ "${1:-}" = "--check" ] || exit 0

K8S_VERSION="${K8S_VERSION:-1.33.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

kubectl kustomize deploy/ >"$work/rendered.yaml"

# Split: schema-validated objects to validate.yaml; the rest checked here.
"$venv/bin/python" - "$work/rendered.yaml" "$work/validate.yaml" <<'PY'
import sys, yaml

rendered, out = sys.argv[1], sys.argv[2]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d is not None]
keep, kinds = [], {}
def fail(msg):
    sys.exit(f"manifests: {msg}")
for d in docs:
    for field in ("apiVersion", "kind", "metadata"):
        if field not in d:
            fail(f"object without {field}: {d!r:.200}")
    name = d["metadata"].get("name")
    if not name:
        fail(f"{d['kind']} without metadata.name")
    kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
    if d["kind"] == "PrometheusRule":
        if d["apiVersion"] != "monitoring.coreos.com/v1":
            fail(f"PrometheusRule {name}: apiVersion {d['apiVersion']}")
        groups = d["spec"]["groups"]
        for g in groups:
            if not g.get("name") or not g.get("rules"):
                fail(f"PrometheusRule {name}: group without name or rules")
            for r in g["rules"]:
                if not r.get("record") or not r.get("expr"):
                    fail(f"PrometheusRule {name}/{g['name']}: rule without record/expr")
        continue
    if d["kind"] == "ConfigMap" and "kube-scheduler-config.yaml" in d.get("data", {}):
        ksc = yaml.safe_load(d["data"]["kube-scheduler-config.yaml"])
        if ksc.get("apiVersion") != "kubescheduler.config.k8s.io/v1" or ksc.get("kind") != "KubeSchedulerConfiguration":
            fail(f"ConfigMap {name}: not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
        for e in ksc.get("extenders", []):
            if e.get("prioritizeVerb") and not e.get("weight", 0) > 0:
                fail("extender with prioritizeVerb needs weight > 0")
    if d["kind"] == "ConfigMap" and "policy.yaml" in d.get("data", {}):
        yaml.safe_load(d["data"]["policy.yaml"])
    keep.append(d)
yaml.safe_dump_all(keep, open(out, "w"), sort_keys=False)
print("manifests: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), file=sys.stderr)
PY

"$venv/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$work/validate.yaml" deploy/examples/*.yaml
echo "manifests: deploy/ renders and validates against Kubernetes $K8S_VERSION" >&2
