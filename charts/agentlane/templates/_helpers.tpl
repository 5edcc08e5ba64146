{{/* Labels Helm adds to config/default's on every object. */}}
{{- define "agentlane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* image renders {repository, tag}, falling back to the chart's image. */}}
{{- define "agentlane.image" -}}
{{- $root := index . 0 }}{{ $img := index . 1 }}
{{- if and $img $img.repository -}}
{{ $img.repository }}:{{ $img.tag | default $root.Values.image.tag | default $root.Chart.AppVersion }}
{{- else -}}
{{ $root.Values.image.repository }}:{{ $root.Values.image.tag | default $root.Chart.AppVersion }}
{{- end }}
{{- end }}

{{/* The Secret mounted for the Session API's certificate, empty when the manager generates it. */}}
{{- define "agentlane.sessionAPISecret" -}}
{{- $tls := .Values.sessionAPI.tls }}
{{- if eq $tls.mode "secret" }}
{{- required "sessionAPI.tls.existingSecret is required with sessionAPI.tls.mode=secret" $tls.existingSecret }}
{{- else if eq $tls.mode "certManager" -}}
agentlane-session-api-cert
{{- else if ne $tls.mode "generate" }}
{{- fail (printf "sessionAPI.tls.mode is %q: one of generate, secret, certManager" $tls.mode) }}
{{- end }}
{{- end }}

{{/* The labels that select a worker pool's pods; a named pool adds its name. */}}
{{- define "agentlane.workerSelector" -}}
app.kubernetes.io/component: worker
app.kubernetes.io/name: agentlane
{{- with .name }}
agentlane.io/worker-pool: {{ . }}
{{- end }}
{{- end }}
