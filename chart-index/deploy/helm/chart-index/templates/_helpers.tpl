{{/* The chart's name. */}}
{{- define "chart-index.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resources' name (63 characters at most: a DNS label). */}}
{{- define "chart-index.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "chart-index.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chart-index.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "chart-index.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "chart-index.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The Secret holding the Basic credentials, if any: the chart's or an existing one. */}}
{{- define "chart-index.secretName" -}}
{{- if .Values.auth.existingSecret }}
{{- .Values.auth.existingSecret }}
{{- else if .Values.auth.basic.user }}
{{- include "chart-index.fullname" . }}
{{- end }}
{{- end }}

{{/* The storage claim: an existing one or the chart's. */}}
{{- define "chart-index.claimName" -}}
{{- default (include "chart-index.fullname" .) .Values.persistence.existingClaim }}
{{- end }}

{{/* Whether the storage is a claim every node can mount read-write (or none). */}}
{{- define "chart-index.sharedStorage" -}}
{{- if or (not .Values.persistence.enabled) .Values.persistence.existingClaim (has "ReadWriteMany" .Values.persistence.accessModes) }}true{{ end }}
{{- end }}
