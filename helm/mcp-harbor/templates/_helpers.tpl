{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "mcp-harbor.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name: the release name, plus the chart name unless it already has it. */}}
{{- define "mcp-harbor.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "mcp-harbor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcp-harbor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcp-harbor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcp-harbor.labels" -}}
helm.sh/chart: {{ include "mcp-harbor.chart" . }}
{{ include "mcp-harbor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The image reference: repository:tag, or repository:tag@digest when a digest pins it. There is no
default repository: nobody publishes the image, the operator builds and pushes it.
*/}}
{{- define "mcp-harbor.image" -}}
{{- $repository := required "image.repository is required: no public mcp-harbor image is published. Build deploy/Dockerfile, push it to a registry your cluster pulls from and set image.repository (docs/kubernetes.md, step 1)" .Values.image.repository }}
{{- $ref := printf "%s:%s" $repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- with .Values.image.digest }}{{ $ref = printf "%s@%s" $ref . }}{{ end }}
{{- $ref }}
{{- end }}

{{/*
server.allowed_hosts as a JSON list (the form MCP_HARBOR__SERVER__ALLOWED_HOSTS takes):
allowedHosts, the Service's in-cluster DNS names and the hosts of every Ingress and HTTPRoute.
*/}}
{{- define "mcp-harbor.allowedHosts" -}}
{{- $fullname := include "mcp-harbor.fullname" . }}
{{- $hosts := concat .Values.allowedHosts (list $fullname (printf "%s.%s" $fullname .Release.Namespace) (printf "%s.%s.svc" $fullname .Release.Namespace) (printf "%s.%s.svc.cluster.local" $fullname .Release.Namespace)) }}
{{- if .Values.ingress.enabled }}
{{- $hosts = concat $hosts (list .Values.ingress.host) .Values.ingress.extraHosts }}
{{- end }}
{{- if .Values.ingress.admin.enabled }}
{{- $hosts = append $hosts .Values.ingress.admin.host }}
{{- end }}
{{- if .Values.httpRoute.enabled }}
{{- $hosts = concat $hosts .Values.httpRoute.hostnames }}
{{- end }}
{{- if .Values.httpRoute.admin.enabled }}
{{- $hosts = concat $hosts .Values.httpRoute.admin.hostnames }}
{{- end }}
{{- $hosts | uniq | toJson }}
{{- end }}

{{/* "<fullname>-<suffix>" within 63 characters. */}}
{{- define "mcp-harbor.suffixed" -}}
{{- printf "%s-%s" (include "mcp-harbor.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-") .suffix }}
{{- end }}

{{/* Non-empty when the server uses PostgreSQL (storage.databaseUrl or storage.existingSecret). */}}
{{- define "mcp-harbor.postgres" -}}
{{- if or .Values.storage.databaseUrl .Values.storage.existingSecret }}true{{ end }}
{{- end }}

{{/* Non-empty when the chart manages a Secret (an inline admin token or database URL). */}}
{{- define "mcp-harbor.hasSecret" -}}
{{- if or .Values.admin.token .Values.storage.databaseUrl .Values.redis.url .Values.auth.sealingKeys }}true{{ end }}
{{- end }}

{{/* "true" when shared session state lives in Redis. */}}
{{- define "mcp-harbor.redis" -}}
{{- if or .Values.redis.url .Values.redis.existingSecret }}true{{ end }}
{{- end }}

{{/* The chart-managed Secret's data: the same in the release's Secret and the hook's copy. */}}
{{- define "mcp-harbor.secretData" -}}
{{- with .Values.admin.token }}
admin-token: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.storage.databaseUrl }}
database-url: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.redis.url }}
redis-url: {{ . | b64enc | quote }}
{{- end }}
{{- with .Values.auth.sealingKeys }}
sealing-keys: {{ . | b64enc | quote }}
{{- end }}
{{- end }}

{{/* The PersistentVolumeClaim holding the embedded SQLite file. */}}
{{- define "mcp-harbor.dataClaim" -}}
{{- .Values.persistence.existingClaim | default (include "mcp-harbor.suffixed" (dict "root" . "suffix" "data")) }}
{{- end }}

{{/*
The container environment, shared by the Deployment and the migration Job.
Call with (dict "root" $ "resources" <name of the ConfigMap/Secret to read> "migrateOnStart" "true"|"false").
*/}}
{{- define "mcp-harbor.env" -}}
{{- $v := .root.Values -}}
- name: MCP_HARBOR_CONFIG
  value: /etc/mcp-harbor/config.toml
- name: MCP_HARBOR__SERVER__HOST
  value: {{ ternary "::" "0.0.0.0" (eq $v.ipFamily "IPv6") | quote }}
- name: MCP_HARBOR__SERVER__PORT
  value: {{ $v.containerPort | quote }}
- name: MCP_HARBOR__SERVER__ALLOWED_HOSTS
  value: {{ include "mcp-harbor.allowedHosts" .root | quote }}
{{- with $v.allowedOrigins }}
- name: MCP_HARBOR__SERVER__ALLOWED_ORIGINS
  value: {{ toJson . | quote }}
{{- end }}
{{- with $v.trustedProxies }}
- name: MCP_HARBOR__SERVER__TRUSTED_PROXIES
  value: {{ toJson . | quote }}
{{- end }}
{{- if include "mcp-harbor.postgres" .root }}
- name: MCP_HARBOR__STORAGE__DATABASE_URL
  valueFrom:
    secretKeyRef:
      {{- if $v.storage.existingSecret }}
      name: {{ $v.storage.existingSecret | quote }}
      key: {{ $v.storage.databaseUrlKey | quote }}
      {{- else }}
      name: {{ .resources | quote }}
      key: database-url
      {{- end }}
{{- else }}
- name: MCP_HARBOR__STORAGE__DATA_DIR
  value: /var/lib/mcp-harbor
{{- end }}
- name: MCP_HARBOR__STORAGE__MIGRATE_ON_START
  value: {{ .migrateOnStart | quote }}
- name: MCP_HARBOR__STORAGE__MAX_CONNECTIONS
  value: {{ $v.storage.maxConnections | quote }}
{{- if or $v.admin.existingSecret $v.admin.token }}
- name: MCP_HARBOR__ADMIN__TOKEN
  valueFrom:
    secretKeyRef:
      {{- if $v.admin.existingSecret }}
      name: {{ $v.admin.existingSecret | quote }}
      key: {{ $v.admin.tokenKey | quote }}
      {{- else }}
      name: {{ .resources | quote }}
      key: admin-token
      {{- end }}
{{- end }}
- name: MCP_HARBOR__ADMIN__ALLOW_HTTP_LOOPBACK_WEBHOOKS
  value: {{ $v.admin.allowHttpLoopbackWebhooks | quote }}
{{- if $v.metrics.enabled }}
- name: MCP_HARBOR__METRICS__LISTEN
  value: {{ printf "%s:%d" (ternary "[::]" "0.0.0.0" (eq $v.ipFamily "IPv6")) (int $v.metrics.port) | quote }}
{{- end }}
{{- with $v.auth.publicUrl }}
- name: MCP_HARBOR__AUTH__PUBLIC_URL
  value: {{ . | quote }}
{{- end }}
{{- if or $v.auth.existingSecret $v.auth.sealingKeys }}
- name: MCP_HARBOR__AUTH__SEALING_KEYS
  valueFrom:
    secretKeyRef:
      {{- if $v.auth.existingSecret }}
      name: {{ $v.auth.existingSecret | quote }}
      key: {{ $v.auth.sealingKeysKey | quote }}
      {{- else }}
      name: {{ .resources | quote }}
      key: sealing-keys
      {{- end }}
{{- end }}
{{- if include "mcp-harbor.redis" .root }}
- name: MCP_HARBOR__REDIS__URL
  valueFrom:
    secretKeyRef:
      {{- if $v.redis.existingSecret }}
      name: {{ $v.redis.existingSecret | quote }}
      key: {{ $v.redis.urlKey | quote }}
      {{- else }}
      name: {{ .resources | quote }}
      key: redis-url
      {{- end }}
- name: MCP_HARBOR__REDIS__KEY_PREFIX
  value: {{ $v.redis.keyPrefix | quote }}
{{- with $v.redis.tls }}
{{- if .secretName }}
{{- range $setting, $key := dict "CA" .caKey "CERT" .certKey "KEY" .keyKey }}
{{- if $key }}
- name: MCP_HARBOR__REDIS__TLS_{{ $setting }}_PATH
  value: {{ printf "%s/%s" (include "mcp-harbor.redisTlsDir" $) $key | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
{{- /* Each pod is a replica: named after the pod, reached by the others at its IP. */}}
- name: MCP_HARBOR__CLUSTER__REPLICA_ID
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_IP
  valueFrom:
    fieldRef:
      fieldPath: status.podIP
- name: MCP_HARBOR__CLUSTER__ADVERTISE_URL
  value: {{ printf (ternary "http://[$(POD_IP)]:%v" "http://$(POD_IP):%v" (eq $v.ipFamily "IPv6")) $v.containerPort | quote }}
- name: MCP_HARBOR__CLUSTER__DRAIN_GRACE_SECS
  value: {{ $v.drainGraceSeconds | quote }}
{{- with $v.telemetry.logFormat }}
- name: MCP_HARBOR__LOG__FORMAT
  value: {{ . | quote }}
{{- end }}
{{- include "mcp-harbor.telemetryEnv" .root }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
OpenTelemetry export (only with telemetry.otlp.endpoint): the [telemetry] settings, the OTLP
headers from an existing Secret (never inline), and the pod's Kubernetes identity as resource
attributes through the downward API ($(VAR) refers to the variables just above it).
*/}}
{{- define "mcp-harbor.telemetryEnv" -}}
{{- $t := .Values.telemetry -}}
{{- if $t.otlp.endpoint }}
- name: MCP_HARBOR__TELEMETRY__OTLP_ENDPOINT
  value: {{ $t.otlp.endpoint | quote }}
{{- with $t.otlp.protocol }}
- name: MCP_HARBOR__TELEMETRY__OTLP_PROTOCOL
  value: {{ . | quote }}
{{- end }}
- name: MCP_HARBOR__TELEMETRY__SAMPLING_RATIO
  value: {{ include "mcp-harbor.samplingRatio" . | quote }}
- name: MCP_HARBOR__TELEMETRY__METRICS_INTERVAL_MS
  value: {{ int64 $t.metricsIntervalMs | toString | quote }}
{{- with $t.serviceName }}
- name: MCP_HARBOR__TELEMETRY__SERVICE_NAME
  value: {{ . | quote }}
{{- end }}
- name: MCP_HARBOR__TELEMETRY__TRACES
  value: {{ $t.traces | quote }}
- name: MCP_HARBOR__TELEMETRY__METRICS
  value: {{ $t.metrics | quote }}
{{- with $t.otlp.headersSecret.name }}
- name: OTEL_EXPORTER_OTLP_HEADERS
  valueFrom:
    secretKeyRef:
      name: {{ . | quote }}
      key: {{ $t.otlp.headersSecret.key | quote }}
{{- end }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: OTEL_RESOURCE_ATTRIBUTES
  value: "k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME),k8s.deployment.name={{ include "mcp-harbor.fullname" . }}"
{{- end }}
{{- end }}

{{/* telemetry.samplingRatio in fixed point: the server reads "1e-05" as a string, not a number. */}}
{{- define "mcp-harbor.samplingRatio" -}}
{{- regexReplaceAll "\\.?0+$" (printf "%.12f" (float64 .Values.telemetry.samplingRatio)) "" }}
{{- end }}

{{/* The pods' ServiceAccount. */}}
{{- define "mcp-harbor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "mcp-harbor.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end }}

{{/*
The migration Job's ServiceAccount: the pods' own when it exists before install
(serviceAccount.create=false); else the hook copy of the chart's ServiceAccount (same annotations),
since a pre-install hook runs before the release's ServiceAccount is created.
*/}}
{{- define "mcp-harbor.migrationServiceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- include "mcp-harbor.suffixed" (dict "root" . "suffix" "migrate") -}}
{{- else -}}
{{- include "mcp-harbor.serviceAccountName" . -}}
{{- end -}}
{{- end }}

{{/* Where the Redis and PostgreSQL TLS Secrets are mounted. */}}
{{- define "mcp-harbor.redisTlsDir" -}}/etc/mcp-harbor/redis-tls{{- end }}
{{- define "mcp-harbor.postgresTlsDir" -}}/etc/mcp-harbor/postgres-tls{{- end }}

{{/* Volumes and mounts of the data stores' TLS Secrets (Deployment and migration Job). */}}
{{- define "mcp-harbor.storeTlsVolumes" -}}
{{- if and (include "mcp-harbor.redis" .) .Values.redis.tls.secretName }}
- name: redis-tls
  secret:
    secretName: {{ .Values.redis.tls.secretName | quote }}
{{- end }}
{{- if and (include "mcp-harbor.postgres" .) .Values.storage.tls.secretName }}
- name: postgres-tls
  secret:
    secretName: {{ .Values.storage.tls.secretName | quote }}
{{- end }}
{{- end }}
{{- define "mcp-harbor.storeTlsMounts" -}}
{{- if and (include "mcp-harbor.redis" .) .Values.redis.tls.secretName }}
- name: redis-tls
  mountPath: {{ include "mcp-harbor.redisTlsDir" . }}
  readOnly: true
{{- end }}
{{- if and (include "mcp-harbor.postgres" .) .Values.storage.tls.secretName }}
- name: postgres-tls
  mountPath: {{ include "mcp-harbor.postgresTlsDir" . }}
  readOnly: true
{{- end }}
{{- end }}

{{/* The fewest replicas that run: autoscaling.minReplicas, or replicaCount. */}}
{{- define "mcp-harbor.replicaFloor" -}}
{{- if .Values.autoscaling.enabled }}{{ .Values.autoscaling.minReplicas }}{{ else }}{{ .Values.replicaCount }}{{ end }}
{{- end }}

{{/* PromQL label matchers of this release's series (metrics.seriesSelector). */}}
{{- define "mcp-harbor.seriesSelector" -}}
{{- .Values.metrics.seriesSelector | default (printf "namespace=%q,service=%q" .Release.Namespace (include "mcp-harbor.fullname" .)) }}
{{- end }}

{{/* The Prometheus metric autoscaling.metric names. */}}
{{- define "mcp-harbor.autoscalingMetric" -}}
{{- get (dict "sessions" "mcp_harbor_sessions_active" "streams" "mcp_harbor_sse_streams_open" "connections" "mcp_harbor_http_connections_open") .Values.autoscaling.metric }}
{{- end }}

{{- define "mcp-harbor.podCommon" -}}
automountServiceAccountToken: false
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Spread the Deployment's pods over nodes and zones. */}}
{{- define "mcp-harbor.topologySpread" -}}
{{- if .Values.topologySpread.enabled }}
topologySpreadConstraints:
  {{- range list "kubernetes.io/hostname" "topology.kubernetes.io/zone" }}
  - maxSkew: {{ $.Values.topologySpread.maxSkew }}
    topologyKey: {{ . }}
    whenUnsatisfiable: {{ $.Values.topologySpread.whenUnsatisfiable }}
    labelSelector:
      matchLabels:
        {{- include "mcp-harbor.selectorLabels" $ | nindent 8 }}
  {{- end }}
{{- end }}
{{- end }}
