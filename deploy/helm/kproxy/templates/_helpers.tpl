{{/* Names and labels shared by every object of the chart. */}}

{{- define "kproxy.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kproxy.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kproxy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kproxy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kproxy.labels" -}}
{{ include "kproxy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The address every replica advertises. */}}
{{- define "kproxy.advertise" -}}
{{- if .Values.advertise -}}
{{- .Values.advertise -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" (include "kproxy.fullname" .) .Release.Namespace (int .Values.ports.kafka) -}}
{{- end -}}
{{- end -}}

{{/* The secure listener's security protocol, "" when neither TLS nor SASL is on. */}}
{{- define "kproxy.secureProtocol" -}}
{{- if and .Values.tls.enabled .Values.sasl.enabled -}}SASL_SSL
{{- else if .Values.tls.enabled -}}SSL
{{- else if .Values.sasl.enabled -}}SASL_PLAINTEXT
{{- end -}}
{{- end -}}

{{/*
The config file: the user's settings, then the listener and security keys
the chart derives from tls and sasl. Keys are `kproxy serve` flag names, as
in config.example.yaml.
*/}}
{{- define "kproxy.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- range $k := list "listen" "admin" "advertise" "node-id" "config" -}}
{{- if hasKey $cfg $k -}}
{{- fail (printf "config.%s is set by the chart; use the chart's values (advertise, nodeId, ports) instead" $k) -}}
{{- end -}}
{{- end -}}
{{- $proto := include "kproxy.secureProtocol" . -}}
{{- if $proto -}}
{{- $host := regexReplaceAll ":[0-9]+$" (include "kproxy.advertise" .) "" -}}
{{- $_ := set $cfg "listeners" (printf "PLAINTEXT://0.0.0.0:%d,%s://0.0.0.0:%d" (int .Values.ports.kafka) $proto (int .Values.tls.port)) -}}
{{- $_ := set $cfg "advertised-listeners" (printf "PLAINTEXT://%s,%s://%s:%d" (include "kproxy.advertise" .) $proto $host (int .Values.tls.port)) -}}
{{- end -}}
{{- if .Values.tls.enabled -}}
{{- if not .Values.tls.secretName -}}
{{- fail "tls.enabled needs tls.secretName (a kubernetes.io/tls Secret)" -}}
{{- end -}}
{{- $_ := set $cfg "tls-cert-file" "/etc/kproxy/tls/tls.crt" -}}
{{- $_ := set $cfg "tls-key-file" "/etc/kproxy/tls/tls.key" -}}
{{- $_ := set $cfg "tls-client-auth" .Values.tls.clientAuth -}}
{{- if ne .Values.tls.clientAuth "none" -}}
{{- $_ := set $cfg "tls-client-ca-file" "/etc/kproxy/tls/ca.crt" -}}
{{- end -}}
{{- end -}}
{{- if .Values.sasl.enabled -}}
{{- $_ := set $cfg "sasl-mechanisms" .Values.sasl.mechanisms -}}
{{- range $k, $v := .Values.sasl.config -}}
{{- $_ := set $cfg $k $v -}}
{{- end -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}
