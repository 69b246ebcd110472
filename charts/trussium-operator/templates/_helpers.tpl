{{/*
The program's name, at most 63 characters: the base of every object name and
the app.kubernetes.io/name label. Deliberately not .Chart.Name: the package is
named trussium-operator-python so that it never collides with the Go
operator's chart, while installed objects keep their names and Deployment
selectors (immutable) across that rename.
*/}}
{{- define "trussium-operator.name" -}}
{{- default "trussium-operator" .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name: the release name when it already contains the chart name. It is
also the name of both webhook configurations (the webhook's
--webhook-config-name), the leader-election Lease and the cluster-scoped
RBAC objects, so it stays short enough for the "-controller" suffixes.
*/}}
{{- define "trussium-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := include "trussium-operator.name" . }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "trussium-operator.controllerName" -}}
{{- printf "%s-controller" (include "trussium-operator.fullname" .) }}
{{- end }}

{{- define "trussium-operator.webhookName" -}}
{{- printf "%s-webhook" (include "trussium-operator.fullname" .) }}
{{- end }}

{{/* The Secret the webhook pods mount and serve from (written by the controller in selfManaged mode). */}}
{{- define "trussium-operator.webhookSecretName" -}}
{{- if eq .Values.certificates.mode "provided" }}
{{- .Values.certificates.provided.existingSecret }}
{{- else }}
{{- printf "%s-webhook-tls" (include "trussium-operator.fullname" .) }}
{{- end }}
{{- end }}

{{/* The CA and its key, selfManaged mode: read by the controller only (docs/adr/0029). */}}
{{- define "trussium-operator.webhookCASecretName" -}}
{{- printf "%s-webhook-ca" (include "trussium-operator.fullname" .) }}
{{- end }}

{{/* The controller's user name: the one identity the managed-Deployment guard lets change specs. */}}
{{- define "trussium-operator.operatorUsername" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "trussium-operator.serviceAccountName" (list . "controller")) }}
{{- end }}

{{/*
A component's ServiceAccount, (list $ "controller"): serviceAccount.name, or
<fullname>-<component> when the chart creates it. An existing account must be named.
*/}}
{{- define "trussium-operator.serviceAccountName" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $account := (index $root.Values $component).serviceAccount }}
{{- if $account.name }}
{{- $account.name }}
{{- else if $account.create }}
{{- printf "%s-%s" (include "trussium-operator.fullname" $root) $component }}
{{- else }}
{{- fail (printf "%s.serviceAccount.name is required when %s.serviceAccount.create is false" $component $component) }}
{{- end }}
{{- end }}

{{/*
<registry>/<repository>, then @digest or :tag (appVersion by default); the
registry is global.imageRegistry, else image.registry, none when both are empty.
*/}}
{{- define "trussium-operator.image" -}}
{{- $registry := (.Values.global).imageRegistry | default .Values.image.registry }}
{{- $repository := ternary .Values.image.repository (printf "%s/%s" (trimSuffix "/" $registry) .Values.image.repository) (empty $registry) }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Pods' pull secrets: imagePullSecrets, then global.imagePullSecrets. */}}
{{- define "trussium-operator.imagePullSecrets" -}}
{{- with concat .Values.imagePullSecrets ((.Values.global).imagePullSecrets | default list) }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* The chart's labels over commonLabels: the chart's win, so selectors and names stay as they are. */}}
{{- define "trussium-operator.labels" -}}
{{- $chart := dict
  "helm.sh/chart" (printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/version" .Chart.AppVersion
  "app.kubernetes.io/managed-by" .Release.Service }}
{{- $chart = merge $chart (include "trussium-operator.selectorLabels" . | fromYaml) }}
{{- toYaml (merge $chart (deepCopy (.Values.commonLabels | default dict))) }}
{{- end }}

{{- define "trussium-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "trussium-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels and selector labels of one component: call with (list $ "controller"). */}}
{{- define "trussium-operator.componentLabels" -}}
{{- $labels := include "trussium-operator.labels" (index . 0) | fromYaml }}
{{- $_ := set $labels "app.kubernetes.io/component" (index . 1) }}
{{- toYaml $labels }}
{{- end }}

{{- define "trussium-operator.componentSelectorLabels" -}}
{{ include "trussium-operator.selectorLabels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}

{{/*
Pod-spec fields both components take from their values, in the same way:
call with (list $ "controller"). Spread constraints without a labelSelector
get the component's selector labels.
*/}}
{{- define "trussium-operator.podSettings" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $values := index $root.Values $component -}}
terminationGracePeriodSeconds: {{ $values.terminationGracePeriodSeconds }}
{{- with $values.podSecurityContext }}
securityContext:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.topologySpreadConstraints }}
{{- $selector := include "trussium-operator.componentSelectorLabels" (list $root $component) | fromYaml }}
topologySpreadConstraints:
  {{- range . }}
  {{- $constraint := deepCopy . }}
  {{- if not (hasKey $constraint "labelSelector") }}
  {{- $_ := set $constraint "labelSelector" (dict "matchLabels" $selector) }}
  {{- end }}
  {{- toYaml (list $constraint) | nindent 2 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* A component's probes, from its values: (list $ "controller"). */}}
{{- define "trussium-operator.probes" -}}
{{- $values := index (index . 0).Values (index . 1) -}}
{{- with $values.livenessProbe }}
livenessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.readinessProbe }}
readinessProbe:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
Namespaces a hook applies to: never the release's own (so the webhook cannot
block its own recovery), only watchNamespace when set, and what the user's
selector adds. Call with (list $ .Values.webhook.runtimeHooks).
*/}}
{{- define "trussium-operator.hookNamespaceSelector" -}}
{{- $root := index . 0 }}
{{- $user := (index . 1).namespaceSelector | default dict -}}
namespaceSelector:
  {{- with $user.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        - {{ $root.Release.Namespace }}
    {{- with $root.Values.watchNamespace }}
    - key: kubernetes.io/metadata.name
      operator: In
      values:
        - {{ . }}
    {{- end }}
    {{- with $user.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
The failure policy, timeout and object selector a hook takes from values;
(list $hookValues $chartLabels) where $chartLabels are matchLabels the
chart requires (they win over the user's).
*/}}
{{- define "trussium-operator.hookSettings" -}}
{{- $hook := index . 0 }}
{{- $required := index . 1 }}
{{- $user := $hook.objectSelector | default dict }}
{{- $labels := merge (deepCopy $required) ($user.matchLabels | default dict) -}}
failurePolicy: {{ $hook.failurePolicy }}
timeoutSeconds: {{ $hook.timeoutSeconds }}
{{- if or $labels $user.matchExpressions }}
objectSelector:
  {{- with $labels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $user.matchExpressions }}
  matchExpressions:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
{{- end }}

{{/* Where the API server reaches the webhook: the Service, or urlOverride in development. */}}
{{- define "trussium-operator.hookClientConfig" -}}
{{- $root := index . 0 }}
{{- $path := index . 1 -}}
clientConfig:
  {{- if $root.Values.webhook.urlOverride }}
  url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhook.urlOverride) $path | quote }}
  {{- else }}
  service:
    name: {{ include "trussium-operator.webhookName" $root }}
    namespace: {{ $root.Release.Namespace }}
    path: {{ $path }}
    port: 443
  {{- end }}
  {{- if eq $root.Values.certificates.mode "provided" }}
  caBundle: {{ $root.Values.certificates.provided.caBundle }}
  {{- end }}
{{- end }}

{{/*
The annotations of both webhook configurations: cert-manager's cainjector
fills caBundle from the chart's CA Certificate, or from the serving
Certificate (its issuer's ca.crt) when certManager.issuerRef is given.
*/}}
{{- define "trussium-operator.hookAnnotations" -}}
{{- if eq .Values.certificates.mode "certManager" -}}
{{- $webhook := include "trussium-operator.webhookName" . -}}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (ternary $webhook (printf "%s-ca" $webhook) (not (empty .Values.certificates.certManager.issuerRef))) }}
{{- end }}
{{- end }}

{{/* Pod template labels: the user's podLabels plus the chart's, the chart's winning (the selector depends on them). */}}
{{- define "trussium-operator.podLabels" -}}
{{- $root := index . 0 }}
{{- $component := index . 1 }}
{{- $chart := include "trussium-operator.componentLabels" (list $root $component) | fromYaml }}
{{- toYaml (merge $chart (deepCopy (index $root.Values $component).podLabels)) }}
{{- end }}

{{/*
Role or ClusterRole scope of the permissions that follow the watched
namespaces: (list $ "Role") renders kind and namespace lines.
*/}}
{{- define "trussium-operator.watchScope" -}}
{{- $root := index . 0 }}
{{- $kind := index . 1 }}
{{- if $root.Values.watchNamespace -}}
kind: {{ $kind }}
{{- else -}}
kind: Cluster{{ $kind }}
{{- end }}
{{- end }}
