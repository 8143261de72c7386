{{/* Chart name, truncated to 63 characters (a label value). */}}
{{- define "kube-node-ready.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Name prefix of every object: the release name, with the chart name appended unless the release
name already contains it. Kept short enough for the longest suffix ("-leader-election").
*/}}
{{- define "kube-node-ready.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 47 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 47 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 47 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kube-node-ready.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "kube-node-ready.labels" -}}
helm.sh/chart: {{ include "kube-node-ready.chart" . }}
app.kubernetes.io/name: {{ include "kube-node-ready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kube-node-ready
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector of the controller pods (never changes across upgrades: Deployment selectors are immutable). */}}
{{- define "kube-node-ready.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-node-ready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "kube-node-ready.controllerLabels" -}}
{{ include "kube-node-ready.labels" . }}
app.kubernetes.io/component: controller
{{- end }}

{{- define "kube-node-ready.controllerName" -}}
{{- printf "%s-controller" (include "kube-node-ready.fullname" .) }}
{{- end }}

{{- define "kube-node-ready.controllerServiceAccountName" -}}
{{- default (include "kube-node-ready.controllerName" .) .Values.serviceAccount.controller.name }}
{{- end }}

{{- define "kube-node-ready.configMapName" -}}
{{- printf "%s-config" (include "kube-node-ready.fullname" .) }}
{{- end }}

{{- define "kube-node-ready.metricsServiceName" -}}
{{- printf "%s-metrics" (include "kube-node-ready.fullname" .) }}
{{- end }}

{{/* Image reference: repository@digest, else repository:tag (tag defaults to appVersion). */}}
{{- define "kube-node-ready.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The controller configuration as it is written to the ConfigMap: values.config with the keys the
chart fills in when they are left empty (worker namespace and image, pull secrets).
*/}}
{{- define "kube-node-ready.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $worker := $config.worker }}
{{- $_ := set $worker "namespace" (include "kube-node-ready.workerNamespace" .) }}
{{- $image := $worker.image }}
{{- if not $image.repository }}
{{- $_ := set $image "repository" .Values.image.repository }}
{{- end }}
{{- if not $image.tag }}
{{- $_ := set $image "tag" (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- if not $image.digest }}
{{- $_ := set $image "digest" .Values.image.digest }}
{{- end }}
{{- if and (not $worker.imagePullSecrets) .Values.imagePullSecrets }}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- $names = append $names .name }}
{{- end }}
{{- $_ := set $worker "imagePullSecrets" $names }}
{{- end }}
{{- if include "kube-node-ready.largeDnsAnswer" . }}
{{- $checks := default dict $worker.checks }}
{{- $mtu := default dict $checks.mtu }}
{{- $_ := set $mtu "largeName" (include "kube-node-ready.largeDnsName" .) }}
{{- $_ := set $checks "mtu" $mtu }}
{{- $_ := set $worker "checks" $checks }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/*
"true" when the chart renders the large-DNS-answer Service and gives its name to the worker as
mtu.largeName: largeDnsAnswer.enabled, controller mode, and config.worker.checks names no
mtu.largeName of its own (that one wins).
*/}}
{{- define "kube-node-ready.largeDnsAnswer" -}}
{{- $checks := default dict .Values.config.worker.checks }}
{{- if and .Values.largeDnsAnswer.enabled (not (include "kube-node-ready.daemonset" .)) (not (dig "mtu" "largeName" "" $checks)) }}true{{ end }}
{{- end }}

{{- define "kube-node-ready.largeDnsServiceName" -}}
{{- printf "%s-large-dns" (include "kube-node-ready.fullname" .) }}
{{- end }}

{{/* The large-DNS-answer Service's name in the cluster DNS: <name>.<worker namespace>.svc.<config.worker.checks.clusterDomain>. */}}
{{- define "kube-node-ready.largeDnsName" -}}
{{- $checks := default dict .Values.config.worker.checks }}
{{- printf "%s.%s.svc.%s" (include "kube-node-ready.largeDnsServiceName" .) (include "kube-node-ready.workerNamespace" .) (default "cluster.local" $checks.clusterDomain) }}
{{- end }}

{{/*
Namespace of the worker pods (and of the controller's Role for them): config.worker.namespace;
empty: `<fullname>-worker`, created by the chart (workerNamespace.create), else the release namespace.
*/}}
{{- define "kube-node-ready.workerNamespace" -}}
{{- if .Values.config.worker.namespace }}
{{- .Values.config.worker.namespace }}
{{- else if .Values.workerNamespace.create }}
{{- printf "%s-worker" (include "kube-node-ready.fullname" .) }}
{{- else }}
{{- .Release.Namespace }}
{{- end }}
{{- end }}

{{/* "true" when the chart creates the worker namespace: its own `<fullname>-worker`, never one named in config.worker.namespace. */}}
{{- define "kube-node-ready.createWorkerNamespace" -}}
{{- if and .Values.workerNamespace.create (not .Values.config.worker.namespace) }}true{{ end }}
{{- end }}

{{/* The worker image as the controller resolves it (workerImage() in pod-spec.ts) from the rendered config: repository@digest, else repository:tag. */}}
{{- define "kube-node-ready.workerImage" -}}
{{- $image := (include "kube-node-ready.config" . | fromYaml).worker.image }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository $image.tag }}
{{- end }}
{{- end }}

{{/*
Namespaces of the Services the worker reads (its service, dns, tcp, podnet and mtu checks): the
`kubernetes` Service's (default), config.worker.checks.dnsService's and those of
config.worker.checks.service.services; one per line.
*/}}
{{- define "kube-node-ready.workerReadNamespaces" -}}
{{- $checks := default dict .Values.config.worker.checks }}
{{- $namespaces := list "default" }}
{{- $namespaces = append $namespaces (first (splitList "/" (default "kube-system/kube-dns" $checks.dnsService))) }}
{{- range (dig "service" "services" (list "default/kubernetes") $checks) }}
{{- $namespaces = append $namespaces (first (splitList "/" .)) }}
{{- end }}
{{- join "\n" (uniq $namespaces) }}
{{- end }}

{{/* Admission policies are rendered: asked for, and served by the API server (admissionregistration.k8s.io/v1, Kubernetes 1.30+). */}}
{{- define "kube-node-ready.admissionPolicies" -}}
{{- if and .Values.admissionPolicies.enabled (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}

{{/* Namespace of the leader-election Lease: the controller's own namespace unless configured. */}}
{{- define "kube-node-ready.leaseNamespace" -}}
{{- default .Release.Namespace .Values.config.leaderElection.namespace }}
{{- end }}

{{/* Port of a HOST:PORT bind address. */}}
{{- define "kube-node-ready.port" -}}
{{- regexFind "[0-9]+$" . }}
{{- end }}

{{- define "kube-node-ready.metricsPort" -}}
{{- include "kube-node-ready.port" .Values.config.metrics.bindAddress }}
{{- end }}

{{/* "true" when /healthz and /readyz have their own address (config.health.bindAddress set and different). */}}
{{- define "kube-node-ready.healthSeparate" -}}
{{- $health := .Values.config.health.bindAddress }}
{{- if and $health (ne $health .Values.config.metrics.bindAddress) }}true{{ end }}
{{- end }}

{{/* /healthz and /readyz: a separate port when config.health.bindAddress is set, else the metrics port. */}}
{{- define "kube-node-ready.healthPortName" -}}
{{- if include "kube-node-ready.healthSeparate" . }}health{{ else }}http-metrics{{ end }}
{{- end }}

{{/* Remediation (deleting failed nodes: at the top level or in any profile) needs delete rights on nodes and NodeClaims. */}}
{{- define "kube-node-ready.remediationEnabled" -}}
{{- $on := .Values.config.nodeManagement.deleteFailedNodes }}
{{- range (.Values.config.profiles | default list) }}
{{- if and .nodeManagement .nodeManagement.deleteFailedNodes }}{{ $on = true }}{{ end }}
{{- end }}
{{- if $on }}true{{ end }}
{{- end }}

{{/* A startup timeout (nodeManagement.startupTimeout not 0), at the top level or in any profile. */}}
{{- define "kube-node-ready.startupTimeoutSet" -}}
{{- $off := "^0*(ns|us|µs|ms|s|m|h)?$" }}
{{- $set := not (regexMatch $off (toString (.Values.config.nodeManagement.startupTimeout | default "0"))) }}
{{- range (.Values.config.profiles | default list) }}
{{- if and .nodeManagement .nodeManagement.startupTimeout (not (regexMatch $off (toString .nodeManagement.startupTimeout))) }}{{ $set = true }}{{ end }}
{{- end }}
{{- if $set }}true{{ end }}
{{- end }}

{{/*
The remediation ledger: the ConfigMap, in the worker namespace, where the controller records the
deletions of the last hour (docs/remediation.md). `<leaseName>-remediation`, the Lease name cut so
the result stays a valid name: the same as the controller's ledgerName() (remediation/ledger.ts).
*/}}
{{- define "kube-node-ready.remediationLedgerName" -}}
{{- printf "%s-remediation" (regexReplaceAll "[-.]+$" (trunc 241 .Values.config.leaderElection.leaseName) "") }}
{{- end }}

{{/* Checks that span several values (values.schema.json checks each value alone). */}}
{{- define "kube-node-ready.validate" -}}
{{- if and (include "kube-node-ready.daemonset" .) (include "kube-node-ready.remediationEnabled" .) }}
{{- fail "config.nodeManagement.deleteFailedNodes (at the top level or in a profile) needs deploymentMode: controller: in DaemonSet mode a node's own pod decides about it, and no pod deletes nodes (a failed node keeps its taint; docs/installation.md#daemonset-mode)" }}
{{- end }}
{{- $checks := .Values.config.worker.containerChecks | default list }}
{{- range (.Values.config.profiles | default list) }}{{ if and .worker .worker.containerChecks }}{{ $checks = concat $checks .worker.containerChecks }}{{ end }}{{ end }}
{{- if and (include "kube-node-ready.daemonset" .) $checks }}
{{- fail "config.worker.containerChecks (at the top level or in a profile) needs deploymentMode: controller: they run as containers of the worker pod, and DaemonSet mode has none (docs/installation.md#daemonset-mode)" }}
{{- end }}
{{- $gates := list (dig "gates" dict .Values.config) }}
{{- range (.Values.config.profiles | default list) }}{{ $gates = append $gates (dig "gates" dict .) }}{{ end }}
{{- $gated := false }}
{{- range $gates }}{{ if or (dig "requireDaemonSets" list .) (dig "requireCSIDrivers" list .) (dig "requireResources" dict .) }}{{ $gated = true }}{{ end }}{{ end }}
{{- if and (include "kube-node-ready.daemonset" .) $gated }}
{{- fail "config.gates (at the top level or in a profile) needs deploymentMode: controller: the controller watches what the gates read (docs/gates.md), and DaemonSet mode has none (docs/installation.md#daemonset-mode)" }}
{{- end }}
{{- if and (include "kube-node-ready.daemonset" .) (include "kube-node-ready.startupTimeoutSet" .) }}
{{- fail "config.nodeManagement.startupTimeout (at the top level or in a profile) needs deploymentMode: controller: in DaemonSet mode a node's own pod retries until it passes or its attempts run out (docs/installation.md#daemonset-mode)" }}
{{- end }}
{{- if and (not .Values.config.leaderElection.enabled) (gt (int .Values.controller.replicas) 1) }}
{{- fail "controller.replicas must be 1 when config.leaderElection.enabled is false: without leader election two controllers would verify the same nodes" }}
{{- end }}
{{- if not (regexMatch ":[0-9]+$" .Values.config.metrics.bindAddress) }}
{{- fail "config.metrics.bindAddress must be HOST:PORT" }}
{{- end }}
{{- if and (include "kube-node-ready.healthSeparate" .) (eq (include "kube-node-ready.port" .Values.config.health.bindAddress) (include "kube-node-ready.metricsPort" .)) }}
{{- fail "config.health.bindAddress must use another port than config.metrics.bindAddress (or be empty)" }}
{{- end }}
{{- end }}

{{/* "true" in DaemonSet mode (deploymentMode: daemonset): no controller; a pod on each unverified node verifies and opens its own node. */}}
{{- define "kube-node-ready.daemonset" -}}
{{- if eq .Values.deploymentMode "daemonset" }}true{{ end }}
{{- end }}

{{- define "kube-node-ready.agentServiceAccountName" -}}
{{- default (printf "%s-agent" (include "kube-node-ready.fullname" .)) .Values.daemonset.serviceAccountName }}
{{- end }}

{{/* Selector of the DaemonSet pods (immutable across upgrades, like the Deployment's). */}}
{{- define "kube-node-ready.agentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "kube-node-ready.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end }}

{{- define "kube-node-ready.agentLabels" -}}
{{ include "kube-node-ready.labels" . }}
app.kubernetes.io/component: agent
{{- end }}
