{{/*
Labels on every object's metadata: the four Helm standard labels plus the part-of label
deploy/ (kustomize) sets. Selectors and pod templates carry only name and component, as in
deploy/, so the rendered objects compare equal to the kustomize base apart from these.
*/}}
{{- define "waterline.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: waterline
{{- end }}

{{- define "waterline.namespace" -}}
{{ .Values.namespace.name }}
{{- end }}

{{- define "waterline.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* imagePullSecrets of a pod spec (nothing when the list is empty). */}}
{{- define "waterline.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Pod-level security context of every waterline pod (Pod Security `restricted`). */}}
{{- define "waterline.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 65532
  runAsGroup: 65532
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- define "waterline.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{/* nodeSelector, tolerations, affinity of a component's values (nothing when empty). */}}
{{- define "waterline.placement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The policy file's text: the value as it is, or a map rendered as YAML. */}}
{{- define "waterline.policy" -}}
{{- if kindIs "string" .Values.policy -}}
{{ .Values.policy }}
{{- else -}}
{{ toYaml .Values.policy }}
{{- end -}}
{{- end }}

{{/*
The name kustomize's configMapGenerator gives a ConfigMap with `data`: <name>-<hash>, the hash
being sha256 of {"data":...,"kind":"ConfigMap","name":""} as Go's encoding/json writes it
(kustomize/api hasher: its metadata/name lookup finds nothing, hence the empty name), first
10 hex digits with 0 1 3 a e replaced by g h k m t. Like kustomize's, the name changes with
the content, so kube-scheduler (which reads its configuration once) rolls on every edit.
Arguments: (list name data).
*/}}
{{- define "waterline.kustomizeHashName" -}}
{{- $name := index . 0 -}}
{{- $data := index . 1 -}}
{{- $hash := dict "data" $data "kind" "ConfigMap" "name" "" | toJson | sha256sum | trunc 10 -}}
{{- $hash = $hash | replace "0" "g" | replace "1" "h" | replace "3" "k" | replace "a" "m" | replace "e" "t" -}}
{{ $name }}-{{ $hash }}
{{- end }}

{{/*
A scorer client's TLS files (the extender sidecar, the plugin-built kube-scheduler, the helm
test), when tls.enabled: the scorer Secret's ca.crt at /etc/waterline/scorer-ca/ca.crt and,
with tls.clientAuth.enabled, the scheduler's client certificate at
/etc/waterline/scorer-client/tls.{crt,key}. Mounts for a container's volumeMounts...
*/}}
{{- define "waterline.scorerClientTlsMounts" -}}
{{- if .Values.tls.enabled }}
- name: scorer-ca
  mountPath: /etc/waterline/scorer-ca
  readOnly: true
{{- if .Values.tls.clientAuth.enabled }}
- name: scorer-client
  mountPath: /etc/waterline/scorer-client
  readOnly: true
{{- end }}
{{- end }}
{{- end }}

{{/* ...and the pod's volumes. */}}
{{- define "waterline.scorerClientTlsVolumes" -}}
{{- if .Values.tls.enabled }}
- name: scorer-ca
  secret:
    secretName: {{ .Values.tls.scorerSecretName }}
    items:
      - {key: ca.crt, path: ca.crt}
{{- if .Values.tls.clientAuth.enabled }}
- name: scorer-client
  secret:
    secretName: {{ .Values.tls.clientAuth.schedulerClientSecretName }}
    items:
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
{{- end }}
{{- end }}
{{- end }}

{{- define "waterline.scorerUrl" -}}
{{ if .Values.tls.enabled }}https{{ else }}http{{ end }}://waterline-scorer.{{ include "waterline.namespace" . }}.svc:{{ .Values.scorer.grpcPort }}
{{- end }}

{{/*
The scorer's --collector-url: every collector replica by its stable StatefulSet name,
comma-separated (the scorer streams from one, fails over to the next, forwards every
Reserve/Unreserve to all).
*/}}
{{- define "waterline.collectorUrl" -}}
{{- $scheme := ternary "https" "http" (.Values.tls.enabled | default false) -}}
{{- $ns := include "waterline.namespace" . -}}
{{- if lt (int .Values.collector.replicas) 1 -}}
{{- fail "collector.replicas must be at least 1: the scorers need a collector to stream from" -}}
{{- end -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.collector.replicas) -}}
{{- $urls = append $urls (printf "%s://waterline-collector-%d.waterline-collector-peers.%s.svc:%v" $scheme $i $ns $.Values.collector.grpcPort) -}}
{{- end -}}
{{ join "," $urls }}
{{- end }}
