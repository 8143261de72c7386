/**
 * Every metric name, label name, label value set and bucket layout, in one place
 * (docs/metrics.md documents each; a test fails when a registered metric is undocumented).
 * Names follow the reference README (`kube_node_ready_*`).
 */
export const METRIC_PREFIX = 'kube_node_ready_';

export const MetricName = {
  // Reference metrics
  VerificationStatus: 'kube_node_ready_verification_status',
  VerificationDuration: 'kube_node_ready_verification_duration_seconds',
  VerificationsTotal: 'kube_node_ready_verifications_total',
  WorkerPods: 'kube_node_ready_worker_pods',
  RetryAttemptsTotal: 'kube_node_ready_retry_attempts_total',
  ControllerHealthy: 'kube_node_ready_controller_healthy',
  ReconcileErrorsTotal: 'kube_node_ready_controller_reconcile_errors_total',
  // Verification, extended
  AttemptOutcomesTotal: 'kube_node_ready_attempt_outcomes_total',
  CreationToTaintRemoval: 'kube_node_ready_creation_to_taint_removal_seconds',
  CheckFailuresTotal: 'kube_node_ready_check_failures_total',
  CheckDuration: 'kube_node_ready_check_duration_seconds',
  WorkerWarningsTotal: 'kube_node_ready_worker_warnings_total',
  ActiveVerifications: 'kube_node_ready_active_verifications',
  WorkerPodsRefusedTotal: 'kube_node_ready_worker_pods_refused_total',
  ClusterWideFailures: 'kube_node_ready_cluster_wide_failures',
  ClusterWideFault: 'kube_node_ready_cluster_wide_fault',
  ControlRunsTotal: 'kube_node_ready_control_runs_total',
  // Controller machinery
  ReconcileDuration: 'kube_node_ready_reconcile_duration_seconds',
  QueueDepth: 'kube_node_ready_queue_depth',
  QueueWait: 'kube_node_ready_queue_wait_seconds',
  Reaction: 'kube_node_ready_reaction_seconds',
  QueueAddsTotal: 'kube_node_ready_queue_adds_total',
  QueueRetriesTotal: 'kube_node_ready_queue_retries_total',
  WatchRestartsTotal: 'kube_node_ready_watch_restarts_total',
  WatchListsTotal: 'kube_node_ready_watch_lists_total',
  ApiRequestsTotal: 'kube_node_ready_api_requests_total',
  ApiThrottledSeconds: 'kube_node_ready_api_throttled_seconds_total',
  Leader: 'kube_node_ready_leader',
  BuildInfo: 'kube_node_ready_build_info',
  // Remediation (issue 5)
  RemediationsTotal: 'kube_node_ready_remediations_total',
  RemediationBlocked: 'kube_node_ready_remediation_blocked',
} as const;
export type MetricName = (typeof MetricName)[keyof typeof MetricName];

export const LabelName = {
  Node: 'node',
  Status: 'status',
  Outcome: 'outcome',
  Check: 'check',
  Result: 'result',
  Resource: 'resource',
  Action: 'action',
  Reason: 'reason',
  Operation: 'operation',
  Step: 'step',
  Version: 'version',
  Commit: 'commit',
  /** The node's profile (config profiles; "default"): bounded by the configuration (at most 20 profiles). */
  Profile: 'profile',
} as const;

/** kube_node_ready_verification_status{status}: where each node is; exactly one is 1 per node. */
export const NodeStatus = ['waiting', 'verifying', 'backoff', 'verified', 'failed'] as const;
export type NodeStatus = (typeof NodeStatus)[number];

/** kube_node_ready_verifications_total{status} (reference values). */
export const AttemptStatus = ['success', 'failed'] as const;
export type AttemptStatus = (typeof AttemptStatus)[number];

/** kube_node_ready_worker_pods{status}: worker pods by phase. */
export const WorkerPodStatus = ['pending', 'running', 'succeeded', 'failed'] as const;
export type WorkerPodStatus = (typeof WorkerPodStatus)[number];

/** Checks the worker ships with (docs/worker.md); their series exist from the start. */
export const KNOWN_CHECKS = ['dns', 'api', 'tcp', 'service', 'podnet', 'mtu', 'egress', 'http'] as const;

export const CheckResult = ['pass', 'fail'] as const;

export const WatchedResource = ['nodes', 'pods', 'nodeverifications'] as const;

/**
 * kube_node_ready_reaction_seconds{step}: `launch`, the node seen able to run its worker (with a
 * free slot) -> its worker pod created; `open`, its passing worker seen finished -> the node opened.
 */
export const ReactionStep = ['launch', 'open'] as const;
export type ReactionStep = (typeof ReactionStep)[number];

/** kube_node_ready_remediations_total{action,result} and kube_node_ready_remediation_blocked{reason} (docs/remediation.md). */
export const RemediationAction = ['delete-nodeclaim', 'delete-node'] as const;
export type RemediationAction = (typeof RemediationAction)[number];
export const RemediationResult = ['deleted', 'dry-run', 'skipped', 'error'] as const;
export type RemediationResult = (typeof RemediationResult)[number];
export const RemediationBlockReason = ['circuit-breaker', 'rate-limit', 'in-flight', 'ledger'] as const;
export type RemediationBlockReason = (typeof RemediationBlockReason)[number];

export const Buckets = {
  /** One worker attempt, pod created to result: seconds to a few minutes. */
  attemptSeconds: [1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300],
  /** Node created to taint removed: includes boot, kubelet and CNI start. */
  creationToTaintRemovalSeconds: [5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 240, 300, 450, 600, 900, 1200, 1800, 3600],
  /** One check inside the worker. */
  checkSeconds: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  /** One reconcile (API calls included). */
  reconcileSeconds: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  /** A burst queues hundreds of nodes at once: waits of tens of seconds are what it is for. */
  queueWaitSeconds: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  /** The controller's own reaction: milliseconds when it keeps up, tens of seconds in a burst it paces. */
  reactionSeconds: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
} as const;
