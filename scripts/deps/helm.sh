#!/usr/bin/env bash
# Helm for the chart in deploy/helm/waterline/.
#
#   scripts/deps/helm.sh          install helm into .tools/bin with `go install` (Go module
#                                 proxy) when missing or not the pinned version; prints its path
#   scripts/deps/helm.sh --check  also lint and render the chart, validate what it renders
#                                 against the Kubernetes schemas (kubernetes-validate --strict,
#                                 offline) and compare it with the kustomize base:
#     - `helm lint --strict` with the default values, mode plugin, and everything on
#       (TLS with client certificates, ServiceMonitor/PodMonitor, PrometheusRules, every PDB,
#       pull secrets), and TLS without client certificates;
#     - values.schema.json: wrong values (a typo'd key, a string for a port, an invalid
#       enum, a port out of range, client certificates without TLS) each make `helm template`
#       fail with an error naming the value's path;
#     - `helm template` of each of those: built-in kinds validated with --strict (the
#       `helm test` Pod included), the Prometheus Operator kinds (no bundled schema)
#       shape-checked here;
#     - default values = `kubectl kustomize deploy/`, and scheduler.mode=plugin =
#       `kubectl kustomize deploy/overlays/plugin/`: the same objects field by field, except
#       Helm's standard labels (helm.sh/chart, app.kubernetes.io/managed-by, /instance,
#       /version), order, and the `helm test` Pod (a hook, not installed). The chart's PrometheusRules are off by default (they need the
#       Operator's CRDs), so the base's three are compared with prometheusRule.enabled=true;
#       grafanaDashboard.enabled=true renders the ConfigMap of `kubectl kustomize deploy/grafana/`;
#     - the `helm test` Pod's script, run against a stub grpcurl: passes on a healthy scorer,
#       fails on NOT_SERVING, a failed Score and a score outside 0..100;
#     - the chart's copies (files/) of the rule files and the dashboard are byte-identical to
#       deploy/prometheus/ and deploy/grafana/.
#
# A cold `go install` (empty Go build cache) compiles helm and its Kubernetes modules: 262 s
# measured on 2 shared cores; with a warm Go build cache (a fresh clone on a used machine, as
# in CI) 13 s; with the binary in .tools/bin nothing is built.
set -euo pipefail
cd "$(dirname "$0")/../.."
HELM_VERSION=v3.22.0
bin="$PWD/.tools/bin/helm"
if ! { [ -x "$bin" ] && "$bin" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM_VERSION"; }; then
    if ! command -v go >/dev/null 2>&1; then
        echo "helm: Go is needed to install helm (go install)" >&2
        exit 1
    fi
    echo "installing helm $HELM_VERSION into .tools/bin (first time only, ~4-5 min on 2 cores)..." >&2
    started=$(date +%s)
    # -ldflags: release builds set the version this way; without it `helm version` says
    # v3.x-dev-unknown... and the check above would rebuild every time.
    GOBIN="$PWD/.tools/bin" go install \
        -ldflags "-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
        "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
    echo "helm $HELM_VERSION installed in $(( $(date +%s) - started )) s" >&2
fi
if [ "${1:-}" != "--check" ]; then
    echo "$bin"
    exit 0
fi

chart=deploy/helm/waterline
venv=.tools/venv
K8S_VERSION="${K8S_VERSION:-1.33.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for f in prometheus/rules.yml prometheus/rules-at-scale.yml prometheus/alerts.yaml prometheus/rebalance.yml grafana/waterline.json; do
    if ! cmp -s "deploy/$f" "$chart/files/${f#*/}"; then
        echo "helm: $chart/files/${f#*/} differs from deploy/$f (copy it: cp deploy/$f $chart/files/)" >&2
        exit 1
    fi
done

everything=(--set tls.enabled=true --set tls.clientAuth.enabled=true --set serviceMonitor.enabled=true --set prometheusRule.enabled=true
    --set grafanaDashboard.enabled=true
    --set collector.podDisruptionBudget.enabled=true --set scheduler.podDisruptionBudget.enabled=true
    --set 'imagePullSecrets[0]=regcred' --set collector.nodeSelector.pool=system
    --set 'scorer.tolerations[0].operator=Exists')
# name: extra helm flags
renders=("default" "plugin --set scheduler.mode=plugin" "rules --set prometheusRule.enabled=true"
    "rules-at-scale --set prometheusRule.enabled=true --set prometheusRule.recordingRulesVariant=recorded"
    "plugin-rules --set scheduler.mode=plugin --set prometheusRule.enabled=true"
    "everything ${everything[*]}" "plugin-everything --set scheduler.mode=plugin ${everything[*]}"
    "tls --set tls.enabled=true" "plugin-tls --set scheduler.mode=plugin --set tls.enabled=true")
for r in "${renders[@]}"; do
    read -r -a args <<<"$r"
    name="${args[0]}"
    flags=("${args[@]:1}")
    "$bin" lint --strict --quiet "$chart" "${flags[@]}" >"$work/$name.lint" 2>&1 ||
        { cat "$work/$name.lint" >&2; echo "helm: lint failed ($name)" >&2; exit 1; }
    "$bin" template waterline "$chart" "${flags[@]}" >"$work/helm-$name.yaml"
done
# Wrong values: each must fail `helm template` with values.schema.json's error naming the
# value's path. name|expected path|expected text|helm flags
negatives=(
    "typo'd key|at '/collector'|'replica'|--set collector.replica=3"
    "string for a port|at '/scorer/grpcPort'|want integer|--set-string scorer.grpcPort=fifty"
    "invalid enum|at '/scheduler/mode'|'extender', 'plugin'|--set scheduler.mode=plugins"
    "port out of range|at '/collector/adminPort'|maximum|--set collector.adminPort=70000"
    "log format|at '/logFormat'|'json', 'plain'|--set logFormat=text"
    "client certificates without TLS|at '/tls/enabled'|true|--set tls.clientAuth.enabled=true"
)
for n in "${negatives[@]}"; do
    IFS='|' read -r what path text flags <<<"$n"
    read -r -a args <<<"$flags"
    if "$bin" template waterline "$chart" "${args[@]}" >/dev/null 2>"$work/negative.err"; then
        echo "helm: values.schema.json accepts a wrong value ($what: $flags)" >&2
        exit 1
    fi
    if ! grep -qF "$path" "$work/negative.err" || ! grep -qF "$text" "$work/negative.err"; then
        cat "$work/negative.err" >&2
        echo "helm: $what ($flags) fails without naming $path ($text)" >&2
        exit 1
    fi
done
# `helm install --dry-run` runs the same schema check (chartutil.ToRenderValues), but only
# after reaching a cluster (even --dry-run=client asks for its version), so not here.
echo "helm: values.schema.json rejects ${#negatives[@]} wrong values with their path" >&2

kubectl kustomize deploy/ >"$work/kustomize-default.yaml"
kubectl kustomize deploy/overlays/plugin/ >"$work/kustomize-plugin.yaml"
kubectl kustomize deploy/grafana/ >"$work/kustomize-grafana.yaml"

"$venv/bin/python" - "$work" <<'PY'
import difflib, sys, yaml

work = sys.argv[1]
HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}
CRDS = {"PrometheusRule", "ServiceMonitor", "PodMonitor"}

def fail(msg):
    sys.exit(f"helm: {msg}")

def load(name):
    return [d for d in yaml.safe_load_all(open(f"{work}/{name}.yaml")) if d is not None]

def strip(obj):
    """Drops Helm's standard labels from every metadata.labels, and empty label and
    annotation maps (kustomize leaves `annotations: {}` where a patch removed the last)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "metadata" and isinstance(v, dict):
                v = dict(v)
                if isinstance(v.get("labels"), dict):
                    v["labels"] = {lk: lv for lk, lv in v["labels"].items() if lk not in HELM_LABELS}
                for m in ("labels", "annotations"):
                    if m in v and not v[m]:
                        del v[m]
            out[k] = strip(v)
        return out
    if isinstance(obj, list):
        return [strip(x) for x in obj]
    return obj

def key(d):
    return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])

def is_test_hook(d):
    return (d["metadata"].get("annotations") or {}).get("helm.sh/hook") == "test"

def index(docs, where):
    out = {}
    for d in docs:
        if key(d) in out:
            fail(f"{where}: {key(d)} twice")
        out[key(d)] = strip(d)
    return out

def compare(helm_name, kust_name, crds):
    """crds: 'without' drops the PrometheusRules of both sides; 'only' compares only them."""
    h, k = index(load(helm_name), helm_name), index(load(kust_name), kust_name)
    # The `helm test` Pod is a hook: `helm install` does not create it.
    h = {x: v for x, v in h.items() if not is_test_hook(v)}
    if crds == "without":
        k = {x: v for x, v in k.items() if x[0] != "PrometheusRule"}
    else:
        h = {x: v for x, v in h.items() if x[0] == "PrometheusRule"}
        k = {x: v for x, v in k.items() if x[0] == "PrometheusRule"}
    if h.keys() != k.keys():
        fail(f"{helm_name} vs {kust_name}: only in helm {sorted(h.keys() - k.keys())}, only in kustomize {sorted(k.keys() - h.keys())}")
    for x in sorted(k):
        if h[x] != k[x]:
            a = yaml.safe_dump(k[x], sort_keys=True).splitlines()
            b = yaml.safe_dump(h[x], sort_keys=True).splitlines()
            diff = "\n".join(difflib.unified_diff(a, b, f"kustomize {x}", f"helm {x}", lineterm=""))
            fail(f"{helm_name} vs {kust_name}: {x} differs:\n{diff}")
    return len(k)

n = compare("helm-default", "kustomize-default", "without")
n_rules = compare("helm-rules", "kustomize-default", "only")
n_plugin = compare("helm-plugin", "kustomize-plugin", "without")
compare("helm-plugin-rules", "kustomize-plugin", "only")
# grafanaDashboard.enabled=true adds exactly deploy/grafana/'s ConfigMap.
g = index(load("helm-everything"), "helm-everything")
for x, d in index(load("kustomize-grafana"), "kustomize-grafana").items():
    if g.get(x) != d:
        fail(f"grafanaDashboard.enabled=true: {x} is not the ConfigMap of kubectl kustomize deploy/grafana/")
print(f"helm: default values = kubectl kustomize deploy/ ({n} objects; the {n_rules} PrometheusRules with "
      f"prometheusRule.enabled=true); scheduler.mode=plugin = deploy/overlays/plugin/ ({n_plugin} objects)", file=sys.stderr)

# Split every render: built-in kinds to <name>.validate.yaml, CRD kinds shape-checked here.
for name in ["default", "plugin", "rules", "plugin-rules", "everything", "plugin-everything", "tls", "plugin-tls"]:
    docs = load(f"helm-{name}")
    tests = [d for d in docs if is_test_hook(d)]
    if [key(d) for d in tests] != [("Pod", "waterline", "waterline-test-scorer")]:
        fail(f"{name}: the helm test hooks are {[key(d) for d in tests]}, want the one Pod waterline-test-scorer")
    test_text = yaml.safe_dump(tests[0])
    tls_on, mtls_on = name.endswith(("everything", "tls")), name.endswith("everything")
    for needle, want in [("-plaintext", not tls_on), ("-cacert /etc/waterline/scorer-ca/ca.crt", tls_on),
                         ("-cert /etc/waterline/scorer-client/tls.crt", mtls_on)]:
        if (needle in test_text) != want:
            fail(f"{name}: the helm test Pod {'lacks' if want else 'has'} grpcurl flag {needle!r}")
    if ("--tls-client-ca=" in open(f"{work}/helm-{name}.yaml").read()) != mtls_on:
        fail(f"{name}: --tls-client-ca {'missing' if mtls_on else 'rendered without tls.clientAuth.enabled'}")
    keep, kinds = [], {}
    for d in docs:
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        if d["kind"] not in CRDS:
            keep.append(d)
            continue
        if d["apiVersion"] != "monitoring.coreos.com/v1":
            fail(f"{name}: {key(d)} apiVersion {d['apiVersion']}")
        spec = d["spec"]
        if d["kind"] == "PrometheusRule":
            for g in spec["groups"]:
                for r in g["rules"]:
                    if not (r.get("record") or r.get("alert")) or not r.get("expr"):
                        fail(f"{name}: {key(d)} rule without record/alert or expr")
        else:
            eps = spec.get("endpoints") or spec.get("podMetricsEndpoints")
            if not eps or not all(e.get("port") == "admin" for e in eps) or not spec["selector"]["matchLabels"]:
                fail(f"{name}: {key(d)} without admin endpoints or selector")
            if spec.get("jobLabel") != "app.kubernetes.io/name":
                fail(f"{name}: {key(d)} jobLabel is not app.kubernetes.io/name (the alerts select job=\"waterline-collector\")")
    if name.endswith("everything"):
        want = {"ServiceMonitor": 2, "PrometheusRule": 3, "PodDisruptionBudget": 3, "ConfigMap": 3}
        if name == "everything":
            want["PodMonitor"] = 1
        for kind, count in want.items():
            if kinds.get(kind) != count:
                fail(f"{name}: {kinds.get(kind, 0)} {kind}, want {count}")
        text = open(f"{work}/helm-{name}.yaml").read()
        for needle in ["--tls-cert=/etc/waterline/tls/tls.crt", "https://waterline-collector-0.waterline-collector-peers.waterline.svc:50052,https://waterline-collector-1.waterline-collector-peers.waterline.svc:50052",
                       "--collector-ca=/etc/waterline/collector-ca/ca.crt", "name: regcred"]:
            if needle not in text:
                fail(f"{name}: {needle!r} not rendered")
        # Client certificates (tls.clientAuth): each listener asks for one, each client presents one.
        for needle in ["--tls-client-ca=/etc/waterline/client-ca/ca.crt", "--collector-cert=/etc/waterline/collector-client/tls.crt",
                       "--collector-key=/etc/waterline/collector-client/tls.key"]:
            if needle not in text:
                fail(f"{name}: {needle!r} not rendered")
        if text.count("--tls-client-ca=") != 2:
            fail(f"{name}: --tls-client-ca on {text.count('--tls-client-ca=')} containers, want 2 (collector, scorer)")
        if name == "everything":
            for needle in ["--scorer-ca=/etc/waterline/scorer-ca/ca.crt", "--scorer-cert=/etc/waterline/scorer-client/tls.crt",
                           "--scorer-key=/etc/waterline/scorer-client/tls.key"]:
                if needle not in text:
                    fail(f"{name}: the extender lacks {needle!r}")
        else:
            for needle in ["caFile: /etc/waterline/scorer-ca/ca.crt", "certFile: /etc/waterline/scorer-client/tls.crt",
                           "keyFile: /etc/waterline/scorer-client/tls.key"]:
                if needle not in text:
                    fail(f"{name}: the plugin's args lack tls {needle!r}")
    yaml.safe_dump_all(keep, open(f"{work}/{name}.validate.yaml", "w"), sort_keys=False)
    if name in ("default", "everything"):
        # The test Pod's script and environment, run below against a stub grpcurl.
        c = tests[0]["spec"]["containers"][0]
        if c["command"][:2] != ["/bin/sh", "-ec"]:
            fail(f"{name}: the helm test Pod's command is not /bin/sh -ec <script>")
        open(f"{work}/test-{name}.sh", "w").write(c["command"][2])
        env = {e["name"]: e["value"] for e in c["env"] if "value" in e}
        open(f"{work}/test-{name}.env", "w").write("".join(f"export {k}='{v}'\n" for k, v in env.items()))
    print(f"helm: {name}: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), file=sys.stderr)
PY

# The helm test script against a stub grpcurl (a real run needs a cluster: the chart's README,
# "helm test"): it must pass on SERVING and a score, and fail on NOT_SERVING, on a failed
# Score RPC and on a score outside 0..100; the stub checks the TLS flags and the request.
mkdir -p "$work/stub"
cat >"$work/stub/grpcurl" <<'SH'
#!/bin/sh
echo "$*" >>"$STUB_LOG"
case "$*" in
    *grpc.health.v1.Health/Check*) printf '{\n  "status": "%s"\n}\n' "$STUB_HEALTH" ;;
    *waterline.v1.ScorerService/Score*)
        case "$*" in *"\"nodeNames\": [\"node-a\"]"*"\"scoresOnly\": true"*) ;; *) echo "bad request: $*" >&2; exit 2 ;; esac
        [ "$STUB_SCORE" = error ] && { echo "ERROR: Code: Unavailable" >&2; exit 1; }
        printf '{\n  "snapshotAge": "1.500s",\n  "orderedScores": [\n    %s\n  ]\n}\n' "$STUB_SCORE" ;;
    *) echo "unexpected call: $*" >&2; exit 2 ;;
esac
SH
chmod +x "$work/stub/grpcurl"
hook_run() { # render health score -> exit status of the test script
    (. "$work/test-$1.env"; export POD_NAMESPACE=waterline POD_NAME=waterline-test-scorer POD_UID=u-1 \
        NODE_NAME=node-a STUB_HEALTH="$2" STUB_SCORE="$3" STUB_LOG="$work/stub.log" PATH="$work/stub:$PATH"
     /bin/sh -ec "$(cat "$work/test-$1.sh")" >"$work/hook.out" 2>&1)
}
for render in default everything; do
    : >"$work/stub.log"
    hook_run "$render" SERVING 57 || { cat "$work/hook.out" >&2; echo "helm: the helm test script ($render) fails on a healthy scorer" >&2; exit 1; }
    if [ "$render" = default ]; then flag="-plaintext"; else flag="-cacert /etc/waterline/scorer-ca/ca.crt -cert /etc/waterline/scorer-client/tls.crt"; fi
    if [ "$(grep -cF -- "$flag" "$work/stub.log")" != 2 ]; then
        cat "$work/stub.log" >&2; echo "helm: the helm test script ($render) does not call grpcurl with $flag" >&2; exit 1
    fi
    for bad in "NOT_SERVING 57" "SERVING error" "SERVING -1" "SERVING 101"; do
        read -r health score <<<"$bad"
        if hook_run "$render" "$health" "$score"; then
            cat "$work/hook.out" >&2; echo "helm: the helm test script ($render) passes with health $health, score $score" >&2; exit 1
        fi
    done
done
echo "helm: the helm test script passes on a healthy scorer and fails on NOT_SERVING, a failed Score, scores -1 and 101" >&2

# One run for every render (one interpreter start).
"$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" \
    "$work"/{default,plugin,everything,plugin-everything,tls,plugin-tls}.validate.yaml >&2
echo "helm: $chart lints, renders and validates against Kubernetes $K8S_VERSION (default, plugin, TLS, everything on)" >&2
