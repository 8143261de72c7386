{{/*
The alerting rules (docs/alerts.md has one section per alert: its runbook). Rendered into the
PrometheusRule (prometheusRule.enabled); examples/prometheus-rules.yaml is this output for the
default values, release "kube-node-ready" in "kube-system" (a test keeps them identical).

Metrics (packages/controller/src/metrics/names.ts):
  kube_node_ready_verification_status{node,status}  1 for the node's current status (waiting, verifying, backoff, verified, failed), 0 for the others
  kube_node_ready_verifications_total{status}       finished worker attempts by result (success, failed)
  kube_node_ready_cluster_wide_fault{check}         1 while attempts failing the check are inconclusive: the cause is outside the nodes
  kube_node_ready_remediation_blocked{reason}       1 while remediation is blocked (circuit-breaker, rate-limit, in-flight, ledger)
  kube_node_ready_leader                            1 on the replica that leads, 0 on the others
  kube_node_ready_controller_healthy                1 when watches run and caches are synced
  up                                                Prometheus' own scrape result for the controller pods
  kube_node_spec_taint{node,key,value,effect}       kube-state-metrics: the taints of each node
*/}}
{{- define "kube-node-ready.alertGroups" -}}
{{- $rule := .Values.prometheusRule }}
{{- $disabled := $rule.disabledAlerts }}
{{- $runbook := $rule.runbookBaseUrl }}
{{- $up := default (printf "job=%q,namespace=%q" (include "kube-node-ready.metricsServiceName" .) .Release.Namespace) $rule.targetSelector }}
{{- $taintKeys := list }}
{{- range .Values.config.nodeManagement.taints }}
{{- $taintKeys = append $taintKeys .key }}
{{- end }}
{{- $labels := $rule.alertLabels }}
{{- $for := default dict $rule.alertFor }}
{{- $ledger := printf "%s/%s" (include "kube-node-ready.workerNamespace" .) (include "kube-node-ready.remediationLedgerName" .) }}
groups:
  - name: kube-node-ready
    rules:
      {{- if not (has "KubeNodeReadyNodeVerificationFailed" $disabled) }}
      - alert: KubeNodeReadyNodeVerificationFailed
        expr: max by (node) (kube_node_ready_verification_status{status="failed"}) == 1
        for: {{ dig "KubeNodeReadyNodeVerificationFailed" "1m" $for }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `Node {{ $labels.node }} failed its network verification.` | quote }}
          description: {{ `Node {{ $labels.node }} used up its verification attempts and still carries the verification taint, so no new workload is scheduled on it. kubectl describe node {{ $labels.node }} names the failed check (Events, condition kube-node-ready.io/NetworkVerified).` | quote }}
          runbook_url: {{ $runbook }}#kubenodereadynodeverificationfailed
      {{- end }}
      {{- if not (has "KubeNodeReadyNodeVerificationPending" $disabled) }}
      - alert: KubeNodeReadyNodeVerificationPending
        expr: max by (node) (kube_node_ready_verification_status{status=~"waiting|verifying|backoff"}) == 1
        for: {{ $rule.pendingFor }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ printf "Node {{ $labels.node }} has been waiting for its network verification for more than %s." $rule.pendingFor | quote }}
          description: {{ printf "Node {{ $labels.node }} is still tainted and neither verified nor failed after %s: it cannot run the worker (NotReady, another startup taint), its worker pods do not finish, or they keep failing and retrying. Capacity the autoscaler bought is not usable." $rule.pendingFor | quote }}
          runbook_url: {{ $runbook }}#kubenodereadynodeverificationpending
      {{- end }}
      {{- if not (has "KubeNodeReadyTaintedNodeNotTracked" $disabled) }}
      - alert: KubeNodeReadyTaintedNodeNotTracked
        expr: |-
          max by (node) (kube_node_spec_taint{key=~{{ join "|" $taintKeys | quote }}})
          unless on (node) max by (node) (kube_node_ready_verification_status)
          and on () count(up{ {{- $up -}} } == 1) > 0
        for: {{ $rule.untrackedFor }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `Node {{ $labels.node }} carries a verification taint the controller is not working on.` | quote }}
          description: {{ printf "Node {{ $labels.node }} has had a verification taint (%s) for more than %s, the controller is running, yet it reports no verification for that node. The node stays closed to workloads until someone acts." (join ", " $taintKeys) $rule.untrackedFor | quote }}
          runbook_url: {{ $runbook }}#kubenodereadytaintednodenottracked
      {{- end }}
      {{- if not (has "KubeNodeReadyHighFailureRate" $disabled) }}
      - alert: KubeNodeReadyHighFailureRate
        expr: |-
          (
            sum(rate(kube_node_ready_verifications_total{status="failed"}[{{ $rule.failureRate.window }}]))
            /
            sum(rate(kube_node_ready_verifications_total[{{ $rule.failureRate.window }}]))
          ) > {{ $rule.failureRate.threshold }}
          and
          sum(increase(kube_node_ready_verifications_total[{{ $rule.failureRate.window }}])) >= {{ $rule.failureRate.minAttempts }}
        for: {{ dig "KubeNodeReadyHighFailureRate" "10m" $for }}
        labels:
          severity: critical
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `{{ $value | humanizePercentage }} of node verification attempts are failing.` | quote }}
          description: {{ printf "The share of failed worker attempts over the last %s is above %v. Failures on many nodes at once usually mean a cluster-wide fault (cluster DNS, CNI, API server, a network policy) rather than bad nodes: new nodes stay closed and scale-up does not help." $rule.failureRate.window $rule.failureRate.threshold | quote }}
          runbook_url: {{ $runbook }}#kubenodereadyhighfailurerate
      {{- end }}
      {{- if not (has "KubeNodeReadyClusterWideFault" $disabled) }}
      - alert: KubeNodeReadyClusterWideFault
        expr: max by (check) (kube_node_ready_cluster_wide_fault) == 1
        for: {{ dig "KubeNodeReadyClusterWideFault" "5m" $for }}
        labels:
          severity: critical
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `New nodes cannot be verified: the {{ $labels.check }} check fails because of something outside the nodes.` | quote }}
          description: {{ `Worker attempts failing the {{ $labels.check }} check are inconclusive: the cluster DNS Service has no ready endpoint, the API server answers 429/5xx, or most recent nodes fail it against the same target. They are not counted against the nodes and no node is replaced for them, but every new node stays tainted until the dependency works again. The VerificationInconclusive Events and the nodes' kube-node-ready condition name the dependency.` | quote }}
          runbook_url: {{ $runbook }}#kubenodereadyclusterwidefault
      {{- end }}
      {{- if not (has "KubeNodeReadyRemediationBlocked" $disabled) }}
      - alert: KubeNodeReadyRemediationBlocked
        expr: max(kube_node_ready_remediation_blocked{reason="circuit-breaker"}) == 1
        for: {{ dig "KubeNodeReadyRemediationBlocked" "5m" $for }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `Remediation of failed nodes is paused by its circuit breaker.` | quote }}
          description: {{ `Too large a share of recent verifications failed, so kube-node-ready stopped deleting failed nodes (a cluster-wide fault must not delete every new node). Failed nodes stay, tainted, until the failure rate drops or the cause is fixed.` | quote }}
          runbook_url: {{ $runbook }}#kubenodereadyremediationblocked
      {{- end }}
      {{- /*
      A ledger block is an alert of its own, not a second reason of KubeNodeReadyRemediationBlocked:
      the breaker is the safety working and closes by itself, while a ledger that cannot be read or
      written (RBAC, an immutable ConfigMap, a hand edit it cannot parse) stays broken until someone
      fixes it, and needs another runbook; disabling one alert must not silence the other. Only the
      leader sets the gauge, so max() gives one alert for the release.
      */}}
      {{- if not (has "KubeNodeReadyRemediationLedgerUnavailable" $disabled) }}
      - alert: KubeNodeReadyRemediationLedgerUnavailable
        expr: max(kube_node_ready_remediation_blocked{reason="ledger"}) == 1
        for: {{ dig "KubeNodeReadyRemediationLedgerUnavailable" "5m" $for }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ printf "Remediation of failed nodes is paused: its ledger ConfigMap %s cannot be read or written." $ledger | quote }}
          description: {{ printf "For 5 minutes kube-node-ready has not been able to read its remediation ledger (ConfigMap %s) or to record a deletion in it, so it deletes no failed node (it never assumes an empty hour and never deletes without a record). Missing RBAC (get/update on that ConfigMap), an immutable ConfigMap or an entry it cannot parse will not clear by themselves; the controller log and the RemediationBlocked Events on failed nodes name the error." $ledger | quote }}
          runbook_url: {{ $runbook }}#kubenodereadyremediationledgerunavailable
      {{- end }}
      {{- if not (has "KubeNodeReadyControllerDown" $disabled) }}
      - alert: KubeNodeReadyControllerDown
        expr: absent(up{ {{- $up -}} } == 1)
        for: {{ dig "KubeNodeReadyControllerDown" "5m" $for }}
        labels:
          severity: critical
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `No kube-node-ready controller is up.` | quote }}
          description: {{ printf "Prometheus has no healthy scrape of the kube-node-ready controller (up{%s}) for 5 minutes. New nodes keep their verification taint and never receive workloads." $up | quote }}
          runbook_url: {{ $runbook }}#kubenodereadycontrollerdown
      {{- end }}
      {{- if not (has "KubeNodeReadyNoLeader" $disabled) }}
      - alert: KubeNodeReadyNoLeader
        expr: max(kube_node_ready_leader) == 0
        for: {{ dig "KubeNodeReadyNoLeader" "5m" $for }}
        labels:
          severity: critical
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `kube-node-ready controllers are running but none is leading.` | quote }}
          description: {{ `No controller replica has held the leader Lease for 5 minutes, so nothing verifies new nodes; they keep their verification taint.` | quote }}
          runbook_url: {{ $runbook }}#kubenodereadynoleader
      {{- end }}
      {{- if not (has "KubeNodeReadyControllerUnhealthy" $disabled) }}
      - alert: KubeNodeReadyControllerUnhealthy
        expr: kube_node_ready_controller_healthy == 0
        for: {{ dig "KubeNodeReadyControllerUnhealthy" "10m" $for }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `kube-node-ready controller {{ $labels.instance }} reports itself unhealthy.` | quote }}
          description: {{ `The controller replica {{ $labels.instance }} has reported kube_node_ready_controller_healthy = 0 (watches not running or caches not synced) for 10 minutes; while it leads, nodes are not verified.` | quote }}
          runbook_url: {{ $runbook }}#kubenodereadycontrollerunhealthy
      {{- end }}
{{- end }}

{{/*
DaemonSet mode (deploymentMode: daemonset): the alerts that make sense without a controller, on the
agents' own metrics (packages/controller/src/agent/metrics.ts), scraped from each agent pod (the
chart's PodMonitor), and kube-state-metrics' taints for a node whose pod never reports (a CNI that
never comes up keeps the pod from starting). Same names and runbooks as in controller mode. There
is no remediation, no cluster-wide fault detection and no leader: those alerts have nothing to watch.
  node_check_status{node}                1: the node passed and was opened; 0: not (yet)
  node_check_completion_timestamp{node}  when the verification ended, passed or failed for good; 0 while it goes on
  kube_node_spec_taint{node,key,value,effect}  kube-state-metrics: the taints of each node
*/}}
{{- define "kube-node-ready.agentAlertGroups" -}}
{{- $rule := .Values.prometheusRule }}
{{- $taintKeys := list }}
{{- range .Values.config.nodeManagement.taints }}
{{- $taintKeys = append $taintKeys .key }}
{{- end }}
{{- $disabled := $rule.disabledAlerts }}
{{- $runbook := $rule.runbookBaseUrl }}
{{- $labels := $rule.alertLabels }}
{{- $for := default dict $rule.alertFor }}
{{- $condition := .Values.config.nodeManagement.condition.type }}
groups:
  - name: kube-node-ready-daemonset
    rules:
      {{- if not (has "KubeNodeReadyNodeVerificationFailed" $disabled) }}
      - alert: KubeNodeReadyNodeVerificationFailed
        expr: max by (node) ((node_check_status == 0) and (node_check_completion_timestamp > 0))
        for: {{ dig "KubeNodeReadyNodeVerificationFailed" "1m" $for }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `Node {{ $labels.node }} failed its network verification.` | quote }}
          description: {{ printf "Node {{ $labels.node }} used up its verification attempts and still carries the verification taint, so no new workload is scheduled on it. kubectl describe node {{ $labels.node }} names the failed check (Events, condition %s); the node's kube-node-ready pod keeps its log." $condition | quote }}
          runbook_url: {{ $runbook }}#kubenodereadynodeverificationfailed
      {{- end }}
      {{- if not (has "KubeNodeReadyNodeVerificationPending" $disabled) }}
      - alert: KubeNodeReadyNodeVerificationPending
        expr: max by (node) ((node_check_status == 0) and (node_check_completion_timestamp == 0))
        for: {{ $rule.pendingFor }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ printf "Node {{ $labels.node }} has been waiting for its network verification for more than %s." $rule.pendingFor | quote }}
          description: {{ printf "The kube-node-ready pod of node {{ $labels.node }} has neither opened nor failed it after %s: the node is not Ready, or its attempts keep failing and retrying. Capacity the autoscaler bought is not usable." $rule.pendingFor | quote }}
          runbook_url: {{ $runbook }}#kubenodereadynodeverificationpending
      {{- end }}
      {{- if not (has "KubeNodeReadyTaintedNodeNotTracked" $disabled) }}
      - alert: KubeNodeReadyTaintedNodeNotTracked
        expr: |-
          max by (node) (kube_node_spec_taint{key=~{{ join "|" $taintKeys | quote }}})
          unless on (node) max by (node) (node_check_status)
        for: {{ $rule.untrackedFor }}
        labels:
          severity: warning
          {{- with $labels }}
          {{- toYaml . | nindent 10 }}
          {{- end }}
        annotations:
          summary: {{ `Node {{ $labels.node }} carries a verification taint and no kube-node-ready pod reports on it.` | quote }}
          description: {{ printf "Node {{ $labels.node }} has had a verification taint (%s) for more than %s and no kube-node-ready pod reports metrics for it: its pod has not started (a CNI that never became ready, a taint the pods do not tolerate, an image that cannot be pulled) or is not scraped (podMonitor.enabled). The node stays closed to workloads until someone acts." (join ", " $taintKeys) $rule.untrackedFor | quote }}
          runbook_url: {{ $runbook }}#kubenodereadytaintednodenottracked
      {{- end }}
{{- end }}
