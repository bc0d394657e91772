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

{{/* The address every replica advertises: the secure listener's, or the plaintext Service's when there is no secure listener. */}}
{{- define "kproxy.advertise" -}}
{{- if not (include "kproxy.secureProtocol" .) -}}
{{- include "kproxy.plaintextAddress" . -}}
{{- else if .Values.advertise -}}
{{- .Values.advertise -}}
{{- else -}}
{{- printf "%s.%s.svc:%d" (include "kproxy.fullname" .) .Release.Namespace (int .Values.tls.port) -}}
{{- end -}}
{{- end -}}

{{/* The plaintext listener's advertised address: its ClusterIP Service, only reachable in the cluster. */}}
{{- define "kproxy.plaintextAddress" -}}
{{- printf "%s-plaintext.%s.svc:%d" (include "kproxy.fullname" .) .Release.Namespace (int .Values.ports.kafka) -}}
{{- end -}}

{{/* "true" when a listener authenticates clients (SASL, or TLS client certificates). */}}
{{- define "kproxy.authenticates" -}}
{{- if or .Values.sasl.enabled (and .Values.tls.enabled (ne .Values.tls.clientAuth "none")) -}}true{{- end -}}
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
{{- $plain := .Values.listeners.plaintext.enabled -}}
{{- if and (not $proto) (not $plain) -}}
{{- fail "no listener: enable the secure listener (sasl.enabled and/or tls.enabled), or listeners.plaintext.enabled=true for an unauthenticated one (served on a ClusterIP Service only)" -}}
{{- end -}}
{{- if and (eq $proto "SASL_PLAINTEXT") (ne .Values.service.type "ClusterIP") (not .Values.allowPlaintextSASLOnLoadBalancer) -}}
{{- fail (printf "the secure listener is SASL_PLAINTEXT (tls.enabled is off) on a %s Service: SCRAM keeps the passwords safe, but every record and request crosses the network in the clear. Enable tls (tls.enabled, tls.secretName), set service.type=ClusterIP, or ask for it by name: allowPlaintextSASLOnLoadBalancer=true" .Values.service.type) -}}
{{- end -}}
{{- if and $proto (not (include "kproxy.authenticates" .)) -}}
{{- fail "tls.enabled without sasl.enabled or tls.clientAuth authenticates nobody, and the load balancer would publish it open to everyone: enable sasl, or set tls.clientAuth=required" -}}
{{- end -}}
{{- if $proto -}}
{{- $ls := list (printf "%s://0.0.0.0:%d" $proto (int .Values.tls.port)) -}}
{{- $adv := list (printf "%s://%s" $proto (include "kproxy.advertise" .)) -}}
{{- if $plain -}}
{{- $ls = append $ls (printf "PLAINTEXT://0.0.0.0:%d" (int .Values.ports.kafka)) -}}
{{- $adv = append $adv (printf "PLAINTEXT://%s" (include "kproxy.plaintextAddress" .)) -}}
{{- end -}}
{{- $_ := set $cfg "listeners" (join "," $ls) -}}
{{- $_ := set $cfg "advertised-listeners" (join "," $adv) -}}
{{- end -}}
{{- /* Authenticated listeners: deny-by-default and super users, never allow-all (anyone could change passwords, ACLs, topics). */ -}}
{{- range $k := list "super-users" "authorizer" "authorizer-dry-run" -}}
{{- if hasKey $cfg $k -}}
{{- fail (printf "config.%s is set by the chart: use superUsers (the authorizer is deny-by-default whenever SASL or TLS client certificates are on)" $k) -}}
{{- end -}}
{{- end -}}
{{- if include "kproxy.authenticates" . -}}
{{- if not .Values.superUsers -}}
{{- fail "superUsers is required with sasl.enabled or tls.clientAuth request/required: the authorizer is deny-by-default, and a super user (e.g. --set superUsers={User:admin}) grants the rest" -}}
{{- end -}}
{{- $_ := set $cfg "authorizer" "deny-by-default" -}}
{{- $_ := set $cfg "super-users" (join "," .Values.superUsers) -}}
{{- end -}}
{{- if .Values.superUserSecret -}}
{{- if not (include "kproxy.authenticates" .) -}}
{{- fail "superUserSecret needs a listener that authenticates (sasl.enabled): without one there is no user to give credentials" -}}
{{- end -}}
{{- $_ := set $cfg "super-user-credentials-file" "/etc/kproxy/super-user/password" -}}
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
{{- /* sasl.config is applied last, so it takes SASL settings only: never the authorizer, super users or listeners the guards above set. */ -}}
{{- range $k, $v := .Values.sasl.config -}}
{{- if or (not (regexMatch "^(sasl|oauth)-" $k)) (eq $k "sasl-mechanisms") -}}
{{- fail (printf "sasl.config.%s: sasl.config takes only sasl-* and oauth-* settings (sasl.mechanisms names the mechanisms); the authorizer is deny-by-default and superUsers names the super users, and no value overrides them" $k) -}}
{{- end -}}
{{- if hasKey $cfg $k -}}
{{- fail (printf "sasl.config.%s is also in config: give it once" $k) -}}
{{- end -}}
{{- $_ := set $cfg $k $v -}}
{{- end -}}
{{- $_ := set $cfg "sasl-mechanisms" .Values.sasl.mechanisms -}}
{{- end -}}
{{- include "kproxy.proxyProtocol" (dict "cfg" $cfg "proto" $proto "from" .Values.proxyProtocol.from) -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* proxyProtocol.from: the balancer's CIDRs, for the secure listener (the
one behind the load balancer), as listener-proxy-protocol-from. */}}
{{- define "kproxy.proxyProtocol" -}}
{{- range $k := list "proxy-protocol-from" "listener-proxy-protocol-from" -}}
{{- if hasKey $.cfg $k -}}
{{- fail (printf "config.%s is set by the chart: use proxyProtocol.from" $k) -}}
{{- end -}}
{{- end -}}
{{- if .from -}}
{{- if not .proto -}}
{{- fail "proxyProtocol.from needs the secure listener (sasl.enabled and/or tls.enabled): only it is behind the load balancer" -}}
{{- end -}}
{{- $pairs := list -}}
{{- range .from -}}
{{- $pairs = append $pairs (printf "%s:%s" $.proto .) -}}
{{- end -}}
{{- $_ := set .cfg "listener-proxy-protocol-from" (join "," $pairs) -}}
{{- end -}}
{{- end -}}
