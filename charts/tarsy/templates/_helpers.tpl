{{/* Chart name. */}}
{{- define "tarsy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Resource-name prefix: release-chart, or the release name when it already contains the chart name. Kept short so suffixed names stay under 63 characters. */}}
{{- define "tarsy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Common labels; pass (dict "ctx" $ "component" "operator"). */}}
{{- define "tarsy.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .ctx.Chart.Name .ctx.Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: tarsy
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
{{ include "tarsy.selectorLabels" . }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels; pass (dict "ctx" $ "component" "operator"). */}}
{{- define "tarsy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tarsy.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* The tarsy image reference. */}}
{{- define "tarsy.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Name of the Secret with the database URL. */}}
{{- define "tarsy.databaseSecret" -}}
{{- if .Values.postgres.enabled }}
{{- printf "%s-database" (include "tarsy.fullname" .) }}
{{- else }}
{{- required "database.existingSecret is required unless postgres.enabled=true" .Values.database.existingSecret }}
{{- end }}
{{- end }}

{{/* Comma-separated namespaces the operator watches. */}}
{{- define "tarsy.watchNamespaces" -}}
{{- if .Values.watchNamespaces }}
{{- join "," .Values.watchNamespaces }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* Namespaces the operator watches, as a list (JSON). */}}
{{- define "tarsy.watchNamespaceList" -}}
{{- if .Values.watchNamespaces }}
{{- toJson .Values.watchNamespaces }}
{{- else }}
{{- toJson (list .Release.Namespace) }}
{{- end }}
{{- end }}

{{- define "tarsy.operatorServiceAccount" -}}
{{- printf "%s-operator" (include "tarsy.fullname" .) }}
{{- end }}
{{- define "tarsy.apiServiceAccount" -}}
{{- printf "%s-api" (include "tarsy.fullname" .) }}
{{- end }}
{{- define "tarsy.webhooksServiceAccount" -}}
{{- printf "%s-webhooks" (include "tarsy.fullname" .) }}
{{- end }}
{{- define "tarsy.investigatorServiceAccount" -}}
{{- .Values.serviceAccounts.investigator.name | default (printf "%s-investigator" (include "tarsy.fullname" .)) }}
{{- end }}

{{/* Name of the webhooks' serving-certificate Secret. */}}
{{- define "tarsy.webhooksTlsSecret" -}}
{{- .Values.webhooks.tls.existingSecret | default (printf "%s-webhooks-tls" (include "tarsy.fullname" .)) }}
{{- end }}

{{/* Name of the bridge's bearer-token Secret. */}}
{{- define "tarsy.bridgeTokenSecret" -}}
{{- .Values.webhooks.bridge.existingTokenSecret | default (printf "%s-bridge-token" (include "tarsy.fullname" .)) }}
{{- end }}

{{/* Environment variable with the database URL, from its Secret. */}}
{{- define "tarsy.databaseEnv" -}}
- name: {{ .Values.database.urlEnv }}
  valueFrom:
    secretKeyRef:
      name: {{ include "tarsy.databaseSecret" . }}
      key: {{ .Values.database.secretKey }}
{{- end }}

{{/* System settings every `tarsy` component reads from its environment (the operator
hands them on to investigation pods), so that all of them see one configuration. */}}
{{- define "tarsy.systemEnv" -}}
- name: TARSY_KUBERNETES_MCP_IMAGE
  value: {{ .Values.kubernetesMcpServer.image | quote }}
- name: TARSY_RUNBOOK_DOMAINS
  value: {{ join "," .Values.runbooks.allowedDomains | quote }}
- name: TARSY_RUNBOOK_TOKEN_DOMAINS
  value: {{ join "," .Values.runbooks.tokenDomains | quote }}
- name: TARSY_CIRCUIT_BREAKER_THRESHOLD
  value: {{ .Values.circuitBreaker.failureThreshold | quote }}
- name: TARSY_CIRCUIT_BREAKER_OPEN_FOR
  value: {{ .Values.circuitBreaker.openFor | quote }}
{{- with .Values.operator.memory }}
- name: TARSY_MEMORY_ENABLED
  value: {{ .enabled | quote }}
- name: TARSY_MEMORY_MAX_INJECTED
  value: {{ .maxInjected | quote }}
- name: TARSY_MEMORY_SIMILARITY_FLOOR
  value: {{ .similarityFloor | quote }}
- name: TARSY_MEMORY_TEXT_FLOOR
  value: {{ .textFloor | quote }}
- name: TARSY_MEMORY_REQUIRE_REVIEW
  value: {{ .requireReview | quote }}
{{- with .embedding }}
{{- if .llmProvider }}
- name: TARSY_MEMORY_EMBEDDING_PROVIDER
  value: {{ .llmProvider | quote }}
- name: TARSY_MEMORY_EMBEDDING_MODEL
  value: {{ .model | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- with .Values.operator.sessionBudget }}
{{- if .maxCostUsd }}
- name: TARSY_SESSION_MAX_COST_USD
  value: {{ .maxCostUsd | quote }}
{{- end }}
{{- if .maxTokens }}
- name: TARSY_SESSION_MAX_TOKENS
  value: {{ .maxTokens | int64 | quote }}
{{- end }}
{{- end }}
{{- with .Values.operator.namespaceBudget }}
{{- if .maxCostUsdPerDay }}
- name: TARSY_SCOPE_MAX_COST_USD_PER_DAY
  value: {{ .maxCostUsdPerDay | quote }}
{{- end }}
{{- end }}
{{- with .Values.operator.pricing }}
- name: TARSY_COST_ESTIMATES
  value: {{ .enabled | quote }}
{{- if .catalogUrl }}
- name: TARSY_PRICE_CATALOG_URL
  value: {{ .catalogUrl | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/* Pod-level settings shared by the chart's workloads. */}}
{{- define "tarsy.podCommon" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- end }}

{{/* A component's args: the tpl-rendered YAML list followed by extraArgs; pass (dict "ctx" $ "c" .Values.operator). */}}
{{- define "tarsy.args" -}}
{{- $args := tpl .c.args .ctx | fromYamlArray }}
{{- toYaml (concat $args (.c.extraArgs | default list)) }}
{{- end }}
