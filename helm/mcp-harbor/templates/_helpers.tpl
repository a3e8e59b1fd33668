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

{{- define "mcp-harbor.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/*
server.allowed_hosts as a JSON list (the form MCP_HARBOR__SERVER__ALLOWED_HOSTS takes):
allowedHosts, the Service's in-cluster DNS names and, when the ingress is on, its host.
*/}}
{{- define "mcp-harbor.allowedHosts" -}}
{{- $fullname := include "mcp-harbor.fullname" . }}
{{- $hosts := concat .Values.allowedHosts (list $fullname (printf "%s.%s" $fullname .Release.Namespace) (printf "%s.%s.svc" $fullname .Release.Namespace) (printf "%s.%s.svc.cluster.local" $fullname .Release.Namespace)) }}
{{- if .Values.ingress.enabled }}
{{- $hosts = append $hosts .Values.ingress.host }}
{{- end }}
{{- $hosts | uniq | toJson }}
{{- end }}
