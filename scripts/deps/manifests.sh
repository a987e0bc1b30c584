#!/usr/bin/env bash
# Offline manifest checks for deploy/.
#
#   scripts/deps/manifests.sh          install kubernetes-validate==1.37.0 (PyPI) into
#                                      .tools/venv when missing; nothing else
#   scripts/deps/manifests.sh --check  also render `kubectl kustomize deploy/` and
#                                      `kubectl kustomize deploy/overlays/plugin/` and validate
#                                      every object against the Kubernetes 1.33 schemas
#                                      (--strict: unknown fields are errors), plus
#                                      deploy/examples/*.yaml; and the alerting rules
#                                      (promtool check rules + promtool test rules of
#                                      deploy/prometheus/alerts*.yaml and rebalance*),
#                                      the descheduler of deploy/descheduler/, and the Grafana
#                                      dashboard (JSON parses, the ConfigMap of
#                                      deploy/grafana/ carries it unchanged)
#
# Objects without a bundled schema are parsed and shape-checked here instead of skipped
# silently: the PrometheusRule (CRD) and the KubeSchedulerConfiguration inside its ConfigMap.
# For the plugin overlay also: it differs from the base only in the scheduler (Deployment
# without the extender sidecar, its config), its profile enables Waterline with a weight and
# an endpoint, and the profile matches plugin/config/scheduler-config.yaml.
# The KubeSchedulerConfiguration and the policy are also decoded field by field by
# `cargo test -p waterline-extender --test deploy`.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.tools/venv
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
installed="$("$venv/bin/python" -m pip show kubernetes-validate 2>/dev/null | sed -n 's/^Version: //p' || true)"
if [ "$installed" != "1.37.0" ]; then
    echo "installing kubernetes-validate==1.37.0 into $venv" >&2
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "kubernetes-validate==1.37.0"
fi
[ "${1:-}" = "--check" ] || exit 0

K8S_VERSION="${K8S_VERSION:-1.33.0}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# One rendering per kustomization: name, directory.
targets=("base deploy/" "plugin deploy/overlays/plugin/")
for t in "${targets[@]}"; do
    set -- $t
    kubectl kustomize "$2" >"$work/$1.rendered.yaml"
done

# Split: schema-validated objects to <target>.validate.yaml; the rest checked here.
"$venv/bin/python" - "$work" plugin/config/scheduler-config.yaml <<'PY'
import sys, yaml

work, plugin_cfg = sys.argv[1], sys.argv[2]
def fail(msg):
    sys.exit(f"manifests: {msg}")

def check(target):
    docs = [d for d in yaml.safe_load_all(open(f"{work}/{target}.rendered.yaml")) if d is not None]
    keep, kinds, ksc_found = [], {}, []
    for d in docs:
        for field in ("apiVersion", "kind", "metadata"):
            if field not in d:
                fail(f"{target}: object without {field}: {d!r:.200}")
        name = d["metadata"].get("name")
        if not name:
            fail(f"{target}: {d['kind']} without metadata.name")
        kinds[d["kind"]] = kinds.get(d["kind"], 0) + 1
        if d["kind"] == "PrometheusRule":
            if d["apiVersion"] != "monitoring.coreos.com/v1":
                fail(f"PrometheusRule {name}: apiVersion {d['apiVersion']}")
            groups = d["spec"]["groups"]
            for g in groups:
                if not g.get("name") or not g.get("rules"):
                    fail(f"PrometheusRule {name}: group without name or rules")
                for r in g["rules"]:
                    if not (r.get("record") or r.get("alert")) or not r.get("expr"):
                        fail(f"PrometheusRule {name}/{g['name']}: rule without record or alert, or without expr")
                    if r.get("alert") and r.get("labels", {}).get("severity") not in ("warning", "critical"):
                        fail(f"PrometheusRule {name}: alert {r['alert']} without severity warning|critical")
            continue
        if d["kind"] == "ConfigMap" and "kube-scheduler-config.yaml" in d.get("data", {}):
            ksc = yaml.safe_load(d["data"]["kube-scheduler-config.yaml"])
            if ksc.get("apiVersion") != "kubescheduler.config.k8s.io/v1" or ksc.get("kind") != "KubeSchedulerConfiguration":
                fail(f"{target}: ConfigMap {name}: not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration")
            for e in ksc.get("extenders", []):
                if e.get("prioritizeVerb") and not e.get("weight", 0) > 0:
                    fail("extender with prioritizeVerb needs weight > 0")
            ksc_found.append(ksc)
        if d["kind"] == "ConfigMap" and "policy.yaml" in d.get("data", {}):
            yaml.safe_load(d["data"]["policy.yaml"])
        keep.append(d)
    if len(ksc_found) != 1:
        fail(f"{target}: {len(ksc_found)} KubeSchedulerConfiguration ConfigMaps, want 1")
    yaml.safe_dump_all(keep, open(f"{work}/{target}.validate.yaml", "w"), sort_keys=False)
    print(f"manifests: {target}: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())), file=sys.stderr)
    return docs, ksc_found[0]

def key(d):
    return (d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])

def is_scheduler(d):
    return (d["kind"] == "Deployment" and d["metadata"]["name"] == "waterline-scheduler") or \
        (d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("waterline-scheduler-config"))

base_docs, _ = check("base")
plugin_docs, ksc = check("plugin")

# The overlay repeats the base's transformers: everything but the scheduler must be identical.
base_rest = {key(d): d for d in base_docs if not is_scheduler(d)}
plugin_rest = {key(d): d for d in plugin_docs if not is_scheduler(d)}
if base_rest.keys() != plugin_rest.keys():
    fail(f"plugin overlay: objects differ from the base: only in base {sorted(base_rest.keys() - plugin_rest.keys())}, "
         f"only in overlay {sorted(plugin_rest.keys() - base_rest.keys())}")
for k, d in base_rest.items():
    if plugin_rest[k] != d:
        fail(f"plugin overlay: {k} differs from the base's")

# The scheduler Deployment: the plugin-built image, no extender sidecar.
dep = next(d for d in plugin_docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "waterline-scheduler")
containers = dep["spec"]["template"]["spec"]["containers"]
names = [c["name"] for c in containers]
if names != ["kube-scheduler"]:
    fail(f"plugin overlay: waterline-scheduler containers {names}, want only kube-scheduler (no extender sidecar)")
if "waterline-kube-scheduler" not in containers[0]["image"]:
    fail(f"plugin overlay: kube-scheduler image {containers[0]['image']} is not the plugin-built waterline-kube-scheduler")
cm_ref = [v["configMap"]["name"] for v in dep["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
if not any(r.startswith("waterline-scheduler-config-") for r in cm_ref):
    fail(f"plugin overlay: the Deployment does not mount the generated scheduler config ({cm_ref})")

# The profile: Waterline through multiPoint with a weight, args with an endpoint, no extender.
if ksc.get("extenders"):
    fail("plugin overlay: the KubeSchedulerConfiguration still has extenders")
profiles = [p for p in ksc.get("profiles", []) if p.get("schedulerName") == "waterline-scheduler"]
if len(profiles) != 1:
    fail("plugin overlay: no profile waterline-scheduler")
prof = profiles[0]
wl = [p for p in prof.get("plugins", {}).get("multiPoint", {}).get("enabled", []) if p.get("name") == "Waterline"]
if len(wl) != 1 or not wl[0].get("weight", 0) > 0:
    fail("plugin overlay: Waterline not enabled through multiPoint with weight > 0")
args = [c.get("args", {}) for c in prof.get("pluginConfig", []) if c.get("name") == "Waterline"]
if len(args) != 1 or ":" not in str(args[0].get("endpoint", "")):
    fail("plugin overlay: Waterline pluginConfig without an endpoint host:port")
if not str(args[0]["endpoint"]).startswith("waterline-scorer.waterline.svc:"):
    fail(f"plugin overlay: endpoint {args[0]['endpoint']} is not the scorer Service")

# Same profile as the one the plugin ships and tests (plugin/config/scheduler-config.yaml).
shipped = yaml.safe_load(open(plugin_cfg))
sp = next(p for p in shipped["profiles"] if p["schedulerName"] == "waterline-scheduler")
if sp.get("plugins") != prof.get("plugins"):
    fail(f"plugin overlay: profile plugins differ from {plugin_cfg}")
sargs = next(c["args"] for c in sp["pluginConfig"] if c["name"] == "Waterline")
for k in set(sargs) | set(args[0]):
    if k != "endpoint" and sargs.get(k) != args[0].get(k):
        fail(f"plugin overlay: Waterline arg {k} = {args[0].get(k)!r}, {plugin_cfg} has {sargs.get(k)!r}")
print("manifests: plugin overlay: base objects unchanged, scheduler = plugin-built image without sidecar, "
      f"profile matches {plugin_cfg}", file=sys.stderr)
PY

for t in "${targets[@]}"; do
    set -- $t
    "$venv/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$work/$1.validate.yaml"
done
"$venv/bin/kubernetes-validate" --strict -k "$K8S_VERSION" deploy/examples/*.yaml
echo "manifests: deploy/ and deploy/overlays/plugin/ render and validate against Kubernetes $K8S_VERSION" >&2

# The descheduler (deploy/descheduler/, opt-in): its objects against the schemas, and the
# DeschedulerPolicy in its ConfigMap (no schema) parsed and checked here: the keys the
# upstream descheduler reads, the query naming a record of deploy/prometheus/rebalance.yml,
# the thresholds derived from deploy/policy/policy.yaml (docs/operations.md#rebalancing),
# the limits, and a cycle no shorter than the 5 m metrics' absorb window.
kubectl kustomize deploy/descheduler/ >"$work/descheduler.rendered.yaml"
"$venv/bin/python" - "$work/descheduler.rendered.yaml" <<'PY'
import re, sys, yaml
def fail(msg):
    sys.exit(f"manifests: descheduler: {msg}")
def seconds(text):
    parts = re.findall(r"(\d+)(h|m|s)", str(text))
    if not parts or "".join(n + u for n, u in parts) != str(text):
        fail(f"cannot read the duration {text!r}")
    return sum(int(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts)
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
kinds = sorted(d["kind"] for d in docs)
if kinds != ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "ServiceAccount"]:
    fail(f"objects {kinds}")
cm = next(d for d in docs if d["kind"] == "ConfigMap")
if "policy.yaml" not in cm.get("data", {}):
    fail(f"ConfigMap {cm['metadata']['name']} has no policy.yaml")
policy = yaml.safe_load(cm["data"]["policy.yaml"])
if (policy.get("apiVersion"), policy.get("kind")) != ("descheduler/v1alpha2", "DeschedulerPolicy"):
    fail("policy.yaml is not a descheduler/v1alpha2 DeschedulerPolicy")
known = {"profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace",
         "maxNoOfPodsToEvictTotal", "evictionFailureEventNotification", "metricsCollector",
         "metricsProviders", "gracePeriodSeconds", "apiVersion", "kind"}
if set(policy) - known:
    fail(f"unknown top-level keys {sorted(set(policy) - known)}")
for key in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictTotal"):
    if not isinstance(policy.get(key), int) or policy[key] < 1:
        fail(f"{key} must be a positive integer (evictions limited per node and per cycle)")
providers = [m for m in policy.get("metricsProviders", []) if m.get("source") == "Prometheus"]
if len(providers) != 1 or not str(providers[0].get("prometheus", {}).get("url", "")).startswith(("http://", "https://")):
    fail("metricsProviders needs one Prometheus source with an http(s) url")
profiles = policy.get("profiles", [])
if len(profiles) != 1:
    fail(f"{len(profiles)} profiles, want 1")
prof = profiles[0]
if prof.get("plugins", {}).get("balance", {}).get("enabled") != ["LowNodeUtilization"]:
    fail("the profile must enable exactly LowNodeUtilization at balance")
configs = {c["name"]: c.get("args", {}) for c in prof.get("pluginConfig", [])}
lnu = configs.get("LowNodeUtilization")
if lnu is None:
    fail("no pluginConfig for LowNodeUtilization")
known_args = {"useDeviationThresholds", "thresholds", "targetThresholds", "numberOfNodes",
              "metricsUtilization", "evictableNamespaces", "evictionLimits"}
if set(lnu) - known_args:
    fail(f"LowNodeUtilization: unknown args {sorted(set(lnu) - known_args)}")
mu = lnu.get("metricsUtilization", {})
if mu.get("source") != "Prometheus" or not mu.get("prometheus", {}).get("query"):
    fail("LowNodeUtilization: metricsUtilization must be source Prometheus with a query")
rebalance = yaml.safe_load(open("deploy/prometheus/rebalance.yml"))
records = {r["record"]: r["expr"] for g in rebalance["groups"] for r in g["rules"]}
if mu["prometheus"]["query"] not in records:
    fail(f"query {mu['prometheus']['query']!r} is not a record of deploy/prometheus/rebalance.yml")
if lnu.get("useDeviationThresholds"):
    fail("useDeviationThresholds: the thresholds are absolute percents of the prediction")
for key in ("thresholds", "targetThresholds"):
    if set(lnu.get(key, {})) != {"MetricResource"}:
        fail(f"{key}: Prometheus mode takes exactly one resource, MetricResource")
if not (isinstance(lnu.get("evictionLimits", {}).get("node"), int) and lnu["evictionLimits"]["node"] >= 1):
    fail("LowNodeUtilization: evictionLimits.node must be a positive integer")
# Thresholds from the waterline policy: under = the water-level target; over >= every
# filterAbove of the metrics the rules read (the `metric=~` selector of rebalance.yml).
wl = yaml.safe_load(open("deploy/policy/policy.yaml"))
selector = re.search(r'metric=~"([^"]+)"', records["waterline:node_resource_predicted_load:now"]).group(1)
read = [m for m in wl["metrics"] if re.fullmatch(selector, m["name"])]
if not read or any("filterAbove" not in m for m in read):
    fail(f"the rules read {[m['name'] for m in read]}: each needs a filterAbove in deploy/policy/policy.yaml")
under, over = lnu["thresholds"]["MetricResource"], lnu["targetThresholds"]["MetricResource"]
if under != wl["curve"]["target"]:
    fail(f"thresholds.MetricResource {under} is not the policy's water-level target {wl['curve']['target']}")
if over < max(m["filterAbove"] for m in read) or over > 100:
    fail(f"targetThresholds.MetricResource {over} is below a filterAbove of {[m['name'] for m in read]} (or above 100)")
# The cycle: no shorter than the absorb window (5 m window + period + ledger lag) of the metrics read.
dep = next(d for d in docs if d["kind"] == "Deployment")
pod = dep["spec"]["template"]["spec"]
args = pod["containers"][0]["args"]
flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
lag = seconds(wl.get("ledger", {}).get("lag", "90s"))
absorb = max(seconds(m.get("window", "5m")) + seconds(m["period"]) + lag for m in read)
if seconds(flags.get("descheduling-interval", "0s")) < absorb:
    fail(f"--descheduling-interval {flags.get('descheduling-interval')} is shorter than the {absorb} s absorb window")
mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "policy")
vol = next(v for v in pod["volumes"] if v["name"] == "policy")
if vol["configMap"]["name"] != cm["metadata"]["name"] or flags.get("policy-config-file") != mount["mountPath"] + "/policy.yaml":
    fail("the Deployment does not read policy.yaml from the generated ConfigMap")
if pod.get("serviceAccountName") != next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]["name"]:
    fail("the Deployment does not run as the descheduler's ServiceAccount")
verbs = {(g, r): set(rule["verbs"]) for rule in next(d for d in docs if d["kind"] == "ClusterRole")["rules"]
         for g in rule["apiGroups"] for r in rule["resources"]}
if verbs.get(("", "pods/eviction")) != {"create"} or "delete" in verbs.get(("", "pods"), set()):
    fail("the ClusterRole must evict through pods/eviction (PDBs respected), never delete pods")
# The values for the upstream chart carry the same policy and interval.
values = yaml.safe_load(open("deploy/descheduler/helm-values.yaml"))
same = {k: v for k, v in policy.items() if k not in ("apiVersion", "kind")}
if values.get("deschedulerPolicy") != same or values.get("deschedulerPolicyAPIVersion") != policy["apiVersion"]:
    fail("helm-values.yaml: deschedulerPolicy differs from policy.yaml")
if values.get("kind") != "Deployment" or str(values.get("deschedulingInterval")) != flags["descheduling-interval"]:
    fail("helm-values.yaml: not a Deployment with deployment.yaml's --descheduling-interval")
print(f"manifests: descheduler: LowNodeUtilization on {mu['prometheus']['query']}, under < {under} % "
      f"(target), over > {over} % (filterAbove of {', '.join(m['name'] for m in read)}), "
      f"{lnu['evictionLimits']['node']} per node, {policy['maxNoOfPodsToEvictTotal']} per cycle, "
      f"every {flags['descheduling-interval']} (absorb window {absorb} s)", file=sys.stderr)
PY
"$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$work/descheduler.rendered.yaml"

# Alerting rules: promtool's own check and unit tests (every alert fires and resolves), and
# the PrometheusRule carries exactly the groups of the plain file.
promtool check rules deploy/prometheus/alerts.yaml >&2
(cd deploy/prometheus && promtool test rules alerts_test.yaml) >&2
# The rebalancing rules likewise: warm-up, hysteresis, staleness and clamping unit-tested.
promtool check rules deploy/prometheus/rebalance.yml >&2
(cd deploy/prometheus && promtool test rules rebalance_test.yaml) >&2
"$venv/bin/python" - <<'PY'
import sys, yaml
plain = yaml.safe_load(open("deploy/prometheus/alerts.yaml"))
obj = yaml.safe_load(open("deploy/prometheus/alerts-rule.yaml"))
if obj["spec"]["groups"] != plain["groups"]:
    sys.exit("manifests: deploy/prometheus/alerts-rule.yaml differs from alerts.yaml (spec.groups vs groups)")
alerts = [r["alert"] for g in plain["groups"] for r in g["rules"] if "alert" in r]
tests = yaml.safe_load(open("deploy/prometheus/alerts_test.yaml"))["tests"]
tested = {}
for t in tests:
    for a in t.get("alert_rule_test", []):
        fired = bool(a.get("exp_alerts"))
        tested.setdefault(a["alertname"], set()).add(fired)
for a in alerts:
    if tested.get(a) != {True, False}:
        sys.exit(f"manifests: alert {a} needs a test where it fires and one where it does not (alerts_test.yaml)")
print(f"manifests: {len(alerts)} alerts, each fired and resolved by alerts_test.yaml; alerts-rule.yaml matches", file=sys.stderr)
rebalance = yaml.safe_load(open("deploy/prometheus/rebalance.yml"))
if yaml.safe_load(open("deploy/prometheus/rebalance-rule.yaml"))["spec"]["groups"] != rebalance["groups"]:
    sys.exit("manifests: deploy/prometheus/rebalance-rule.yaml differs from rebalance.yml (spec.groups vs groups)")
records = {r["record"] for g in rebalance["groups"] for r in g["rules"]}
tested = " ".join(q["expr"] for t in yaml.safe_load(open("deploy/prometheus/rebalance_test.yaml"))["tests"]
                  for q in t.get("promql_expr_test", []))
for r in sorted(records - {"waterline:node_resource_predicted_load:now"}):
    if r not in tested:
        sys.exit(f"manifests: record {r} of rebalance.yml is not queried by rebalance_test.yaml")
print(f"manifests: rebalance.yml: {len(records)} records, tested; rebalance-rule.yaml matches", file=sys.stderr)
PY

# The Grafana dashboard: the JSON parses and is well-formed, and the ConfigMap that
# deploy/grafana/ renders for Grafana's sidecar carries it unchanged. (Every panel query is
# run against a real Prometheus by `cargo test -p waterline-tests --test dashboard`.)
kubectl kustomize deploy/grafana/ >"$work/grafana.rendered.yaml"
"$venv/bin/python" - "$work/grafana.rendered.yaml" <<'PY'
import json, sys, yaml
def fail(msg):
    sys.exit(f"manifests: {msg}")
text = open("deploy/grafana/waterline.json").read()
try:
    dash = json.loads(text)
except ValueError as e:
    fail(f"deploy/grafana/waterline.json does not parse: {e}")
if not dash.get("uid") or not dash.get("title"):
    fail("waterline.json: no uid or title")
ids, targets = set(), 0
def walk(panels):
    global targets
    for p in panels:
        if p["id"] in ids:
            fail(f"waterline.json: panel id {p['id']} twice")
        ids.add(p["id"])
        if p["type"] != "row":
            if p.get("datasource", {}).get("uid") != "${datasource}":
                fail(f"waterline.json: panel {p['title']!r} does not use the $datasource variable")
            if not p.get("targets") or not all(t.get("expr") for t in p["targets"]):
                fail(f"waterline.json: panel {p['title']!r} without a query")
            targets += len(p["targets"])
        walk(p.get("panels", []))
walk(dash["panels"])
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
if len(docs) != 1 or docs[0]["kind"] != "ConfigMap":
    fail("deploy/grafana/ must render exactly one ConfigMap")
cm = docs[0]
if cm["metadata"].get("labels", {}).get("grafana_dashboard") != "1":
    fail("the dashboard ConfigMap lacks the label grafana_dashboard: \"1\"")
if cm["data"].get("waterline.json") != text:
    fail("the dashboard ConfigMap does not carry deploy/grafana/waterline.json unchanged")
print(f"manifests: dashboard {dash['uid']}: {len(ids)} panels, {targets} queries; ConfigMap {cm['metadata']['name']} carries it", file=sys.stderr)
PY
"$venv/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$work/grafana.rendered.yaml"
