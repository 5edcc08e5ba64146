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

{{/*
The manager's bound flags from sessionAPI.bounds, sessionStore, delegation and
capacity: one --flag=value per value set; a value left empty ("" or null)
passes no flag, so the manager's default applies. A key the chart does not
know fails the render rather than being dropped.
*/}}
{{- define "agentlane.boundArgs" -}}
{{- $groups := list
  (list "sessionAPI.bounds" .Values.sessionAPI.bounds (dict
    "retainedEvents" "session-api-retained-events"
    "maxPayloadBytes" "session-api-max-payload-bytes"
    "rate" "session-api-rate"
    "burst" "session-api-burst"
    "failedAuthRate" "session-api-failed-auth-rate"
    "failedAuthBurst" "session-api-failed-auth-burst"
    "maxConnections" "session-api-max-connections"
    "maxConnectionsPerAddress" "session-api-max-connections-per-address"
    "readTimeout" "session-api-read-timeout"
    "writeTimeout" "session-api-write-timeout"
    "idleTimeout" "session-api-idle-timeout"
    "maxHeaderBytes" "session-api-max-header-bytes"
    "http2MaxConcurrentStreams" "session-api-http2-max-concurrent-streams"
    "maxStreamsPerCaller" "session-api-max-streams-per-caller"
    "maxStreamsPerSession" "session-api-max-streams-per-session"
    "maxWaitsPerCaller" "session-api-max-waits-per-caller"
    "maxWaitsPerSession" "session-api-max-waits-per-session"
    "maxReviewsInFlight" "session-api-max-reviews-in-flight"
    "maxReviewsInFlightPerAddress" "session-api-max-reviews-in-flight-per-address"
    "reauthorizeInterval" "session-api-reauthorize-interval"
    "refusalHold" "session-api-refusal-hold"
    "maxPendingPerSession" "session-api-max-pending-per-session"
    "maxPendingBytesPerSession" "session-api-max-pending-bytes-per-session"
    "maxPendingBytes" "session-api-max-pending-bytes"
    "pendingNamespaceShare" "session-api-pending-namespace-share"
    "maxMessageBytes" "session-api-max-message-bytes"
    "checkpointRate" "session-api-checkpoint-rate"
    "checkpointBurst" "session-api-checkpoint-burst"
    "namespaceCheckpointRate" "session-api-namespace-checkpoint-rate"
    "namespaceCheckpointBurst" "session-api-namespace-checkpoint-burst"
    "inboxWriteInterval" "session-api-inbox-write-interval"
    "maxDelegationsPendingPerSession" "session-api-max-delegations-pending-per-session"
    "maxDelegationsPerSession" "session-api-max-delegations-per-session"
    "maxDelegationsPendingPerNamespace" "session-api-max-delegations-pending-per-namespace"
    "maxDelegationsPerNamespace" "session-api-max-delegations-per-namespace"
    "maxAssignmentWaits" "session-api-max-assignment-waits"
    "maxAssignmentWaitsPerNamespace" "session-api-max-assignment-waits-per-namespace"))
  (list "sessionStore" .Values.sessionStore (dict
    "maxCheckpointBytes" "session-store-max-checkpoint-bytes"
    "namespaceWriteRate" "session-store-namespace-write-rate"
    "namespaceWriteBurst" "session-store-namespace-write-burst"))
  (list "delegation" .Values.delegation (dict
    "maxDepth" "delegation-max-depth"
    "maxChildren" "delegation-max-children"
    "timeout" "delegation-timeout"))
  (list "capacity" .Values.capacity (dict
    "workerPoolMaxReplicas" "workerpool-max-replicas"
    "workerPoolsPerNamespace" "workerpool-max-per-namespace"
    "runtimePoolMaxPods" "runtimepool-max-pods"
    "runtimePoolsPerNamespace" "runtimepool-max-per-namespace")) }}
{{- range $g := $groups }}
{{- $name := index $g 0 }}{{ $flags := index $g 2 }}
{{- range $k, $v := (index $g 1 | default dict) }}
{{- $flag := get $flags $k }}
{{- if not $flag }}{{ fail (printf "%s.%s: the chart passes no such flag (see values.yaml)" $name $k) }}{{ end }}
{{- if and (not (kindIs "invalid" $v)) (ne (toString $v) "") }}
- --{{ $flag }}={{ if and (kindIs "float64" $v) (eq $v (float64 (int64 $v))) }}{{ int64 $v }}{{ else }}{{ $v }}{{ end }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
workerDirect is the Direct stream of a worker pool (list root pool), as YAML:
enabled, server, capacity, tokenExpirationSeconds, and the ConfigMap the
Session API's CA comes from (caConfigMap). workers.direct
gives every pool's settings; a pool's direct.enabled and direct.capacity,
when set, override them for that pool.
*/}}
{{- define "agentlane.workerDirect" -}}
{{- $root := index . 0 }}{{ $pool := index . 1 }}
{{- $d := $root.Values.workers.direct | default dict }}
{{- $enabled := $d.enabled | default false }}
{{- $capacity := $d.capacity }}
{{- with $pool.direct }}
{{- if not (kindIs "invalid" .enabled) }}{{ $enabled = .enabled }}{{ end }}
{{- if not (kindIs "invalid" .capacity) }}{{ $capacity = .capacity }}{{ end }}
{{- end }}
{{- $capacity = int64 ($capacity | default 0) }}
{{- if and $enabled (or (lt $capacity 1) (gt $capacity 1024)) }}
{{- fail (printf "worker pool %q: the Direct capacity (workers.direct.capacity, the pool's direct.capacity) must be 1 to 1024, got %v" ($pool.name | default "") $capacity) }}
{{- end }}
{{- $expiration := int64 ($d.tokenExpirationSeconds | default 3600) }}
{{- if and $enabled (lt $expiration 600) }}
{{- fail (printf "workers.direct.tokenExpirationSeconds must be at least 600 (the API server's least), got %v" $expiration) }}
{{- end }}
enabled: {{ $enabled }}
server: {{ $d.server | default $root.Values.sessionAPI.url | default (printf "https://agentlane-session-api.%s.svc:8443" $root.Release.Namespace) | quote }}
capacity: {{ $capacity }}
tokenExpirationSeconds: {{ $expiration }}
caConfigMap: {{ $d.caConfigMap | default "agentlane-session-api-ca" | quote }}
{{- end }}

{{/* anyWorkerDirect is "true" when a worker pool has Direct lanes on. */}}
{{- define "agentlane.anyWorkerDirect" -}}
{{- range $pool := .Values.workers.pools }}
{{- if (include "agentlane.workerDirect" (list $ $pool) | fromYaml).enabled }}true{{ end }}
{{- end }}
{{- end }}

{{/* tracingEnv is the OTEL_* variables of the values' tracing, none when its
otlpEndpoint is empty. */}}
{{- define "agentlane.tracingEnv" -}}
{{- with .Values.tracing }}
{{- if .otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .otlpEndpoint | quote }}
{{- with .sampler }}
- name: OTEL_TRACES_SAMPLER
  value: {{ . | quote }}
{{- end }}
{{- with .samplerArg }}
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}
