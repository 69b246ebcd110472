{{/*
/metrics of both programs (metrics.*): HTTPS behind the API server's reviews
unless metrics.secure is false, with metrics.certificateSecret's certificate
when set, else the webhook's serving certificate: the webhook serves it from
its own certificate folder, the controller from the same Secret mounted as an
optional volume (in selfManaged mode the controller writes that Secret after
it starts, and serves a self-signed certificate until the kubelet fills the
volume). The ServiceMonitor verifies it against the webhook's CA (ADR 0039).
Each takes (list $ "controller"|"webhook").
*/}}
{{- define "trussium-operator.metricsArgs" -}}
{{- $root := index . 0 }}
{{- $metrics := $root.Values.metrics }}
- --metrics-bind-address=0.0.0.0:{{ $metrics.port }}
- --metrics-secure={{ $metrics.secure }}
{{- if $metrics.secure }}
{{- if and (eq (index . 1) "webhook") (not $metrics.certificateSecret) }}
- --metrics-cert-path=/run/trussium/certs
{{- else }}
- --metrics-cert-path=/run/trussium/metrics-certs
{{- end }}
{{- end }}
{{- end }}

{{- define "trussium-operator.metricsCertificateMount" -}}
{{- $root := index . 0 }}
{{- $metrics := $root.Values.metrics }}
{{- if and $metrics.secure (or $metrics.certificateSecret (eq (index . 1) "controller")) -}}
- name: metrics-certs
  mountPath: /run/trussium/metrics-certs
  readOnly: true
{{- end }}
{{- end }}

{{- define "trussium-operator.metricsCertificateVolume" -}}
{{- $root := index . 0 }}
{{- $metrics := $root.Values.metrics }}
{{- if and $metrics.secure $metrics.certificateSecret -}}
- name: metrics-certs
  secret:
    secretName: {{ $metrics.certificateSecret }}
    defaultMode: 0440
{{- else if and $metrics.secure (eq (index . 1) "controller") -}}
- name: metrics-certs
  secret:
    secretName: {{ include "trussium-operator.webhookSecretName" $root }}
    defaultMode: 0440
    optional: true
    items:
      - key: tls.crt
        path: tls.crt
      - key: tls.key
        path: tls.key
{{- end }}
{{- end }}

{{- /* The ConfigMap the ServiceMonitor reads the CA from in provided mode. */}}
{{- define "trussium-operator.metricsCAConfigMapName" -}}
{{- printf "%s-metrics-ca" (include "trussium-operator.fullname" .) }}
{{- end }}

{{- /* The endpoints' tlsConfig of the ServiceMonitor with metrics.secure. */}}
{{- define "trussium-operator.metricsTLSConfig" -}}
{{- $sm := .Values.metrics.serviceMonitor }}
{{- if $sm.tlsConfig }}
{{- toYaml $sm.tlsConfig }}
{{- else if $sm.insecureSkipVerify }}
insecureSkipVerify: true
{{- else if .Values.metrics.certificateSecret }}
{{- fail "metrics.certificateSecret: set metrics.serviceMonitor.tlsConfig (the CA that signed it and a serverName it carries), or metrics.serviceMonitor.insecureSkipVerify=true" }}
{{- else if and $sm.namespace (ne $sm.namespace .Release.Namespace) }}
{{- fail "metrics.serviceMonitor.namespace: a ServiceMonitor in another namespace cannot read the webhook's CA from the release namespace; set metrics.serviceMonitor.tlsConfig (a CA in its namespace and serverName), or metrics.serviceMonitor.insecureSkipVerify=true" }}
{{- else }}
ca:
  {{- if eq .Values.certificates.mode "provided" }}
  configMap:
    name: {{ include "trussium-operator.metricsCAConfigMapName" . }}
    key: ca.crt
  {{- else }}
  secret:
    name: {{ include "trussium-operator.webhookSecretName" . }}
    key: ca.crt
  {{- end }}
serverName: {{ printf "%s.%s.svc" (include "trussium-operator.webhookName" .) .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Fails when metrics.port is one of the other ports of the Pod: (list $ port...). */}}
{{- define "trussium-operator.metricsPortCheck" -}}
{{- $root := index . 0 }}
{{- range $port := rest . }}
{{- if eq (int $root.Values.metrics.port) (int $port) }}
{{- fail (printf "metrics.port %d is taken by another port of the Pod" (int $port)) }}
{{- end }}
{{- end }}
{{- end }}
