{{/*
/metrics of both programs (metrics.*): HTTPS behind the API server's reviews
unless metrics.secure is false, with metrics.certificateSecret's certificate
when set, else a self-signed one each Pod makes.
*/}}
{{- define "trussium-operator.metricsArgs" -}}
- --metrics-bind-address=0.0.0.0:{{ .Values.metrics.port }}
- --metrics-secure={{ .Values.metrics.secure }}
{{- if and .Values.metrics.secure .Values.metrics.certificateSecret }}
- --metrics-cert-path=/run/trussium/metrics-certs
{{- end }}
{{- end }}

{{- define "trussium-operator.metricsCertificateMount" -}}
{{- if and .Values.metrics.secure .Values.metrics.certificateSecret -}}
- name: metrics-certs
  mountPath: /run/trussium/metrics-certs
  readOnly: true
{{- end }}
{{- end }}

{{- define "trussium-operator.metricsCertificateVolume" -}}
{{- if and .Values.metrics.secure .Values.metrics.certificateSecret -}}
- name: metrics-certs
  secret:
    secretName: {{ .Values.metrics.certificateSecret }}
    defaultMode: 0440
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
