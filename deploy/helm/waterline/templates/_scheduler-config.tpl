{{/*
The KubeSchedulerConfiguration of each scheduler mode. The text (comments included) is
deploy/scheduler/kube-scheduler-config.yaml and deploy/overlays/plugin/kube-scheduler-config.yaml
with the values filled in, so that for the default values the ConfigMap's content, and with it
its kustomize-style hash suffix, is the same as deploy/'s (scripts/deps/helm.sh --check).
*/}}
{{- define "waterline.schedulerConfig.extender" -}}
# A second, stock kube-scheduler with one profile, `waterline-scheduler`. Extenders are
# global to a scheduler process (docs/design.md#the-extender-protocol), so a dedicated process keeps
# every other pod away from the extender; the extender also answers other schedulerNames neutrally.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: {{ include "waterline.namespace" . }}
  # Must not collide with the default scheduler's `kube-scheduler` lease.
  resourceName: {{ .Values.scheduler.name }}
profiles:
  - schedulerName: {{ .Values.scheduler.name }}
    plugins:
      score:
        disabled:
          # Request-based scoring pulls the other way from a water level: LeastAllocated
          # spreads by requests and BalancedAllocation evens cpu/memory requests, while
          # waterline packs toward a target of *real* usage. Trimaran's docs advise the same.
          # NodeResourcesFit still *filters* (a pod never lands where its requests do not fit).
          - name: NodeResourcesFit
          - name: NodeResourcesBalancedAllocation
extenders:
  - urlPrefix: http://127.0.0.1:{{ .Values.scheduler.extender.port }}/waterline/v1
    filterVerb: filter
    prioritizeVerb: prioritize
    # No preemptVerb (waterline would return the candidates unchanged: a wasted round trip)
    # and no bindVerb (the default binder is fine; waterline learns placements from Reserve
    # or the collector's pod watch).
    # 0..10 × weight × 10: up to 500 points next to ~900 for the remaining in-tree scorers.
    weight: {{ .Values.scheduler.extender.weight }}
    # Names only: ~50 bytes per node instead of 5-15 KiB, and it avoids
    # kubernetes/kubernetes#141781 (returned NodeList objects scored as empty nodes).
    nodeCacheCapable: true
    # Above the extender's --scorer-timeout ({{ .Values.scheduler.extender.scorerTimeout }}), so a slow scorer is answered neutrally
    # by the extender before the scheduler gives up on it.
    httpTimeout: {{ .Values.scheduler.extender.httpTimeout }}
    # If the extender itself is down, schedule without it instead of failing every pod.
    ignorable: true
    enableHTTPS: false
{{- end }}

{{- define "waterline.schedulerConfig.plugin" -}}
# kube-scheduler configuration of the plugin-built scheduler (plugin/cmd/kube-scheduler), run
# as a second scheduler. The profile is plugin/config/scheduler-config.yaml's (see
# plugin/README.md, "The profile"); scripts/deps/manifests.sh --check fails if the two profiles
# drift apart. Differences: the leader lease lives in the `waterline` namespace (the base's
# RBAC grants it there), and clientConnection is left to the in-cluster service account.
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  resourceNamespace: {{ include "waterline.namespace" . }}
  # Must not collide with the default scheduler's `kube-scheduler` lease.
  resourceName: {{ .Values.scheduler.name }}
profiles:
  - schedulerName: {{ .Values.scheduler.name }}
    plugins:
      # multiPoint enables Waterline at every extension point it implements:
      # PreFilter/Filter, PreScore/Score (+NormalizeScore), Reserve/Unreserve.
      multiPoint:
        enabled:
          - name: Waterline
            # 0..100 × 5 = up to 500 points, next to ~1,000 at most for the in-tree scores left
            # on (TaintToleration, NodeAffinity, PodTopologySpread, InterPodAffinity,
            # ImageLocality), which are mostly equal across ordinary candidates: between
            # similar nodes waterline decides, a user's hard preference can still win.
            weight: {{ .Values.scheduler.plugin.weight }}
      score:
        # Request-based scoring pulls against a water level (LeastAllocated spreads by
        # requests, BalancedAllocation evens request ratios). NodeResourcesFit still filters.
        disabled:
          - name: NodeResourcesFit
          - name: NodeResourcesBalancedAllocation
      preScore:
        # Their PreScore only prepares their Score.
        disabled:
          - name: NodeResourcesFit
          - name: NodeResourcesBalancedAllocation
    pluginConfig:
      - name: Waterline
        args:
          # The scorer Service of the base (deploy/scorer/service.yaml). One HTTP/2
          # connection per scheduler stays on one scorer replica, which applies each Reserve
          # at once, so the next pod's Score already counts the previous placement.
          endpoint: waterline-scorer.{{ include "waterline.namespace" . }}.svc:{{ .Values.scorer.grpcPort }}
          # Per RPC; Filter and Score sit inside the serialized scheduling cycle.
          timeout: {{ .Values.scheduler.plugin.timeout }}
          # On an RPC error or timeout every node passes and scores are equal (counted in
          # waterline_plugin_fail_open_total): waterline can never stop this scheduler.
          failOpen: {{ .Values.scheduler.plugin.failOpen }}
          {{- if .Values.tls.enabled }}
          # The scorer serves TLS: its certificate is checked against the scorer Secret's
          # ca.crt (server name: the endpoint's host).
          tls:
            caFile: /etc/waterline/scorer-ca/ca.crt
            {{- if .Values.tls.clientAuth.enabled }}
            certFile: /etc/waterline/scorer-client/tls.crt
            keyFile: /etc/waterline/scorer-client/tls.key
            {{- end }}
          {{- end }}
{{- end }}
