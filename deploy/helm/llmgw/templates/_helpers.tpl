{{/* The release's objects' name: the release, with the chart's name unless the release already holds it. */}}
{{- define "llmgw.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The admin port's Service: always ClusterIP. */}}
{{- define "llmgw.adminServiceName" -}}
{{- printf "%s-admin" (include "llmgw.fullname" . | trunc 57 | trimSuffix "-") -}}
{{- end -}}

{{/* The labels that select the release's pods; they never change for a release. */}}
{{- define "llmgw.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Every object's labels. */}}
{{- define "llmgw.labels" -}}
{{ include "llmgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "llmgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "llmgw.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret LLMGW_CACHE_SECRET comes from: the one given, or the chart's. */}}
{{- define "llmgw.cacheSecretName" -}}
{{- default (printf "%s-cache" (include "llmgw.fullname" .)) .Values.cacheSecret.existingSecret -}}
{{- end -}}

{{/* The directory llmgw writes to: the image's working directory and TMPDIR. */}}
{{- define "llmgw.dataDir" -}}/var/lib/llmgw{{- end -}}

{{/*
The configuration file: .Values.config with what the chart owns set, and
a failure for each of those set in .Values.config as well.
*/}}
{{- define "llmgw.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $owned := dict
  "server" (list "listen" "admin_listen" "drain_delay" "shutdown_grace")
  "store" (list "url" "spool_dir")
  "limits" (list "redis")
  "admin" (list "token")
  "epp" (list "listen")
  "router" (list "cache_secret") -}}
{{- range $section, $fields := $owned -}}
{{- $s := get $cfg $section | default dict -}}
{{- range $fields -}}
{{- if hasKey $s . -}}
{{- fail (printf "config.%s.%s is set by the chart: see the comment on config in values.yaml" $section .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $server := get $cfg "server" | default dict -}}
{{- $_ := set $server "listen" (printf ":%d" (int .Values.ports.api)) -}}
{{- $_ := set $server "admin_listen" (printf ":%d" (int .Values.ports.admin)) -}}
{{- $_ := set $server "drain_delay" (printf "%ds" (int .Values.drain.delaySeconds)) -}}
{{- $_ := set $server "shutdown_grace" (printf "%ds" (int .Values.drain.shutdownGraceSeconds)) -}}
{{- $_ := set $cfg "server" $server -}}
{{- if .Values.epp.enabled -}}
{{- $epp := get $cfg "epp" | default dict -}}
{{- $_ := set $epp "listen" (printf ":%d" (int .Values.ports.epp)) -}}
{{- if not (hasKey $epp "tls") -}}
{{- $_ := set $epp "tls" true -}}
{{- end -}}
{{- $_ := set $cfg "epp" $epp -}}
{{- end -}}
{{- $store := get $cfg "store" | default dict -}}
{{- if not .Values.postgres.existingSecret -}}
{{- $_ := set $store "url" (printf "sqlite:%s/llmgw.db" (include "llmgw.dataDir" .)) -}}
{{- end -}}
{{- $_ := set $store "spool_dir" (printf "%s/spool" (include "llmgw.dataDir" .)) -}}
{{- $_ := set $cfg "store" $store -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/*
The EPP's Service, which the InferencePool's endpointPickerRef names.
*/}}
{{- define "llmgw.eppServiceName" -}}
{{- printf "%s-epp" (include "llmgw.fullname" . | trunc 59 | trimSuffix "-") -}}
{{- end -}}
