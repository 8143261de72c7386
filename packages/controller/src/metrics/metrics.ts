import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import {
  AttemptStatus,
  Buckets,
  CheckResult,
  KNOWN_CHECKS,
  LabelName,
  MetricName,
  NodeStatus,
  ReactionStep,
  RemediationAction,
  RemediationBlockReason,
  RemediationResult,
  WatchedResource,
  WorkerPodStatus,
} from './names.js';
import { OUTCOMES } from '../controllers/node/verification/types.js';
import { DEFAULT_PROFILE } from '../config/schema.js';

/**
 * Every metric of the controller, registered on an injected Registry (no global registry), with
 * series of known label values pre-set to 0 so dashboards and alerts see them from the start.
 * Per-node series are removed with forgetNode() when the node goes away.
 */
export interface MetricsOptions {
  version: string;
  commit: string;
  /** Counts worker pods by status at scrape time (from the informer cache). */
  workerPods?: () => Record<WorkerPodStatus, number>;
  /** Per check, the most distinct nodes failing it against one target in the window, at scrape time. */
  clusterWideFailures?: () => ReadonlyMap<string, number>;
  /** The checks whose cluster-wide signal is raised (an attempt was inconclusive on them, no node passed them since), at scrape time. */
  clusterWideFaults?: () => ReadonlyMap<string, unknown>;
  /** The profile names (config profiles, "default" included), preset at 0: the values of the `profile` label. */
  profiles?: readonly string[];
}

const L = LabelName;

export class ControllerMetrics {
  readonly verificationStatus: Gauge<typeof L.Node | typeof L.Status>;
  readonly verificationDuration: Histogram<typeof L.Status | typeof L.Profile>;
  readonly verificationsTotal: Counter<typeof L.Status | typeof L.Profile>;
  readonly workerPods: Gauge<typeof L.Status>;
  readonly retryAttemptsTotal: Counter<typeof L.Node>;
  readonly controllerHealthy: Gauge;
  readonly reconcileErrorsTotal: Counter;
  readonly attemptOutcomesTotal: Counter<typeof L.Outcome | typeof L.Profile>;
  readonly creationToTaintRemoval: Histogram<typeof L.Profile>;
  readonly checkFailuresTotal: Counter<typeof L.Check | typeof L.Profile>;
  readonly checkDuration: Histogram<typeof L.Check | typeof L.Result>;
  readonly workerWarningsTotal: Counter<typeof L.Check>;
  readonly workerPodsRefusedTotal: Counter<typeof L.Reason>;
  readonly controlRunsTotal: Counter<typeof L.Result>;
  readonly activeVerifications: Gauge;
  readonly clusterWideFailures: Gauge<typeof L.Check>;
  readonly clusterWideFault: Gauge<typeof L.Check>;
  readonly reconcileDuration: Histogram<typeof L.Result>;
  readonly queueDepth: Gauge;
  readonly queueWait: Histogram;
  readonly reaction: Histogram<typeof L.Step>;
  readonly queueAddsTotal: Counter;
  readonly queueRetriesTotal: Counter;
  readonly watchRestartsTotal: Counter<typeof L.Resource>;
  readonly watchListsTotal: Counter<typeof L.Resource>;
  readonly leader: Gauge;
  readonly apiRequestsTotal: Counter<typeof L.Operation | typeof L.Result>;
  readonly apiThrottledSeconds: Counter;
  readonly buildInfo: Gauge<typeof L.Version | typeof L.Commit>;
  readonly remediationsTotal: Counter<typeof L.Action | typeof L.Result>;
  readonly remediationBlocked: Gauge<typeof L.Reason>;

  constructor(
    readonly registry: Registry,
    opts: MetricsOptions,
  ) {
    const registers = [registry];
    this.verificationStatus = new Gauge({
      name: MetricName.VerificationStatus,
      help: 'Verification status of each node under verification or verified by this controller: 1 for its current status, 0 for the others.',
      labelNames: [L.Node, L.Status],
      registers,
    });
    this.verificationDuration = new Histogram({
      name: MetricName.VerificationDuration,
      help: 'Duration of worker attempts, from pod creation to result, by result (success, failed) and profile.',
      labelNames: [L.Status, L.Profile],
      buckets: [...Buckets.attemptSeconds],
      registers,
    });
    this.verificationsTotal = new Counter({
      name: MetricName.VerificationsTotal,
      help: 'Worker attempts finished, by result (success, failed) and profile.',
      labelNames: [L.Status, L.Profile],
      registers,
    });
    const workerPods = opts.workerPods;
    this.workerPods = new Gauge({
      name: MetricName.WorkerPods,
      help: 'Worker pods that exist now, by status (pending, running, succeeded, failed).',
      labelNames: [L.Status],
      registers,
      collect() {
        if (!workerPods) return;
        const counts = workerPods();
        for (const status of WorkerPodStatus) this.set({ status }, counts[status]);
      },
    });
    this.retryAttemptsTotal = new Counter({
      name: MetricName.RetryAttemptsTotal,
      help: 'Retries started per node (attempts after the first).',
      labelNames: [L.Node],
      registers,
    });
    this.controllerHealthy = new Gauge({
      name: MetricName.ControllerHealthy,
      help: '1 when the controller is healthy (watches running, caches synced), else 0.',
      registers,
    });
    this.reconcileErrorsTotal = new Counter({
      name: MetricName.ReconcileErrorsTotal,
      help: 'Reconciles that ended with an error (retried with backoff).',
      registers,
    });
    this.attemptOutcomesTotal = new Counter({
      name: MetricName.AttemptOutcomesTotal,
      help: 'Worker attempts finished, by outcome (Passed, ChecksFailed, WorkerError, NotScheduled, NotStarted, DeadlineExceeded, PodDeleted, ClusterWide) and profile.',
      labelNames: [L.Outcome, L.Profile],
      registers,
    });
    this.creationToTaintRemoval = new Histogram({
      name: MetricName.CreationToTaintRemoval,
      help: 'Time from node creation to the removal of its verification taint (node opened), by profile.',
      labelNames: [L.Profile],
      buckets: [...Buckets.creationToTaintRemovalSeconds],
      registers,
    });
    this.checkFailuresTotal = new Counter({
      name: MetricName.CheckFailuresTotal,
      help: 'Failed checks reported by workers, by check and profile.',
      labelNames: [L.Check, L.Profile],
      registers,
    });
    this.checkDuration = new Histogram({
      name: MetricName.CheckDuration,
      help: 'Duration of each check inside the worker, by check and result (pass, fail).',
      labelNames: [L.Check, L.Result],
      buckets: [...Buckets.checkSeconds],
      registers,
    });
    this.workerWarningsTotal = new Counter({
      name: MetricName.WorkerWarningsTotal,
      help: 'Warnings reported by workers (findings that do not fail the node, such as slow answers), by check.',
      labelNames: [L.Check],
      registers,
    });
    this.workerPodsRefusedTotal = new Counter({
      name: MetricName.WorkerPodsRefusedTotal,
      help: 'Worker pods the API server refused to create (admission webhook or policy, ResourceQuota, Pod Security), by the refusal\'s reason (Forbidden, Invalid, BadRequest...). Not counted against the node: it feeds the remediation circuit breaker.',
      labelNames: [L.Reason],
      registers,
    });
    this.controlRunsTotal = new Counter({
      name: MetricName.ControlRunsTotal,
      help: 'Control runs (the checks most new nodes fail alike, run on a verified node), by result: passed (the failures were the nodes\' own), failed (the cause is outside them), unavailable (no verified node could run it, or it gave no answer).',
      labelNames: [L.Result],
      registers,
    });
    this.activeVerifications = new Gauge({
      name: MetricName.ActiveVerifications,
      help: 'Worker attempts in flight (bounded by reconciliation.maxConcurrentVerifications).',
      registers,
    });
    const clusterWide = opts.clusterWideFailures;
    this.clusterWideFailures = new Gauge({
      name: MetricName.ClusterWideFailures,
      help: 'Distinct nodes failing a check against one target (a nameserver, the API server) in the last 10 minutes, the most over targets, by check.',
      labelNames: [L.Check],
      registers,
      collect() {
        if (!clusterWide) return;
        const max = clusterWide();
        for (const check of KNOWN_CHECKS) this.set({ check }, max.get(check) ?? 0);
      },
    });
    const faults = opts.clusterWideFaults;
    this.clusterWideFault = new Gauge({
      name: MetricName.ClusterWideFault,
      help: '1 while attempts failing this check are inconclusive because the cause is outside the nodes (the cluster DNS Service without endpoints, the API answering 429/5xx, most recent nodes failing it alike), until a node passes it; by check. Set by the leader.',
      labelNames: [L.Check],
      registers,
      collect() {
        if (!faults) return;
        const raised = faults();
        for (const check of new Set([...KNOWN_CHECKS, ...raised.keys()])) this.set({ check }, raised.has(check) ? 1 : 0);
      },
    });
    this.reconcileDuration = new Histogram({
      name: MetricName.ReconcileDuration,
      help: 'Duration of one reconcile of one node, by result (success, error).',
      labelNames: [L.Result],
      buckets: [...Buckets.reconcileSeconds],
      registers,
    });
    this.queueDepth = new Gauge({ name: MetricName.QueueDepth, help: 'Nodes waiting in the work queue.', registers });
    this.queueWait = new Histogram({
      name: MetricName.QueueWait,
      help: 'How long a node waited in the work queue, from queued to taken by a worker (client-go workqueue_queue_duration_seconds).',
      buckets: [...Buckets.queueWaitSeconds],
      registers,
    });
    this.reaction = new Histogram({
      name: MetricName.Reaction,
      help:
        "The controller's own reaction, from the watch event that let it act to its write acknowledged, by step: launch (a node able to run its worker, with a free slot -> the worker pod created), open (a passing worker finished -> the node opened).",
      labelNames: [L.Step],
      buckets: [...Buckets.reactionSeconds],
      registers,
    });
    for (const step of ReactionStep) this.reaction.zero({ step });
    this.queueAddsTotal = new Counter({ name: MetricName.QueueAddsTotal, help: 'Nodes added to the work queue.', registers });
    this.queueRetriesTotal = new Counter({
      name: MetricName.QueueRetriesTotal,
      help: 'Rate-limited re-adds to the work queue (reconcile errors).',
      registers,
    });
    this.watchRestartsTotal = new Counter({
      name: MetricName.WatchRestartsTotal,
      help: 'Watches restarted after an error, by resource.',
      labelNames: [L.Resource],
      registers,
    });
    this.watchListsTotal = new Counter({
      name: MetricName.WatchListsTotal,
      help: 'Lists an informer made of its resource: one at start, then one each time its watch could not resume (410 Gone: its resourceVersion was too old; a restart after a failed list). Rising after start means watches are relisting.',
      labelNames: [L.Resource],
      registers,
    });
    this.leader = new Gauge({ name: MetricName.Leader, help: '1 while this replica is the leader, else 0.', registers });
    this.apiRequestsTotal = new Counter({
      name: MetricName.ApiRequestsTotal,
      help: 'API requests made, by operation ("create pod", "patch node"...) and result (success, error).',
      labelNames: [L.Operation, L.Result],
      registers,
    });
    this.apiThrottledSeconds = new Counter({
      name: MetricName.ApiThrottledSeconds,
      help: 'Total time API calls waited for the client-side rate limit (kubernetes.qps, kubernetes.burst).',
      registers,
    });
    this.buildInfo = new Gauge({
      name: MetricName.BuildInfo,
      help: 'Always 1; the labels carry the version and commit.',
      labelNames: [L.Version, L.Commit],
      registers,
    });
    this.remediationsTotal = new Counter({
      name: MetricName.RemediationsTotal,
      help: 'Remediation actions on failed nodes, by action (delete-nodeclaim, delete-node) and result.',
      labelNames: [L.Action, L.Result],
      registers,
    });
    this.remediationBlocked = new Gauge({
      name: MetricName.RemediationBlocked,
      help: '1 while remediation is blocked for the reason given, else 0.',
      labelNames: [L.Reason],
      registers,
    });

    this.preset(opts);
  }

  /** Known label combinations start at 0, so absent-vs-zero never confuses an alert. */
  private preset(opts: MetricsOptions): void {
    const profiles = opts.profiles ?? [DEFAULT_PROFILE];
    for (const profile of profiles) {
      for (const status of AttemptStatus) {
        this.verificationsTotal.inc({ status, profile }, 0);
        this.verificationDuration.zero({ status, profile });
      }
      for (const outcome of OUTCOMES) this.attemptOutcomesTotal.inc({ outcome, profile }, 0);
      for (const check of KNOWN_CHECKS) this.checkFailuresTotal.inc({ check, profile }, 0);
      this.creationToTaintRemoval.zero({ profile });
    }
    for (const status of WorkerPodStatus) this.workerPods.set({ status }, 0);
    for (const check of KNOWN_CHECKS) {
      this.workerWarningsTotal.inc({ check }, 0);
      this.clusterWideFailures.set({ check }, 0);
      this.clusterWideFault.set({ check }, 0);
      for (const result of CheckResult) this.checkDuration.zero({ check, result });
    }
    for (const resource of WatchedResource) {
      this.watchRestartsTotal.inc({ resource }, 0);
      this.watchListsTotal.inc({ resource }, 0);
    }
    for (const action of RemediationAction) for (const result of RemediationResult) this.remediationsTotal.inc({ action, result }, 0);
    for (const reason of RemediationBlockReason) this.remediationBlocked.set({ reason }, 0);
    for (const result of ['success', 'error']) this.reconcileDuration.zero({ result });
    this.controllerHealthy.set(0);
    this.reconcileErrorsTotal.inc(0);
    this.activeVerifications.set(0);
    this.queueDepth.set(0);
    this.queueAddsTotal.inc(0);
    this.queueRetriesTotal.inc(0);
    this.leader.set(0);
    this.apiThrottledSeconds.inc(0);
    this.buildInfo.set({ version: opts.version, commit: opts.commit }, 1);
  }

  /** Sets the node's current status to 1 and its other statuses to 0. */
  setNodeStatus(node: string, current: NodeStatus): void {
    for (const status of NodeStatus) this.verificationStatus.set({ node, status }, status === current ? 1 : 0);
  }

  /** Removes every per-node series (the node was deleted, or is no longer ours to report). */
  forgetNode(node: string): void {
    for (const status of NodeStatus) this.verificationStatus.remove({ node, status });
    this.retryAttemptsTotal.remove({ node });
  }

  /** One finished worker attempt of a node of `profile`. */
  recordAttempt(attempt: {
    profile?: string;
    outcome: string;
    durationSeconds?: number;
    checks: ReadonlyArray<{ name: string; ok: boolean; durationMs: number }>;
    /** The summary's warnings, by check. */
    warnings?: ReadonlyArray<{ check: string }>;
  }): void {
    const status: AttemptStatus = attempt.outcome === 'Passed' ? 'success' : 'failed';
    const profile = attempt.profile ?? DEFAULT_PROFILE;
    this.verificationsTotal.inc({ status, profile });
    this.attemptOutcomesTotal.inc({ outcome: attempt.outcome, profile });
    if (attempt.durationSeconds !== undefined && attempt.durationSeconds >= 0) {
      this.verificationDuration.observe({ status, profile }, attempt.durationSeconds);
    }
    for (const check of attempt.checks) {
      const result = check.ok ? 'pass' : 'fail';
      if (!check.ok) this.checkFailuresTotal.inc({ check: check.name, profile });
      this.checkDuration.observe({ check: check.name, result }, check.durationMs / 1000);
    }
    for (const warning of attempt.warnings ?? []) this.workerWarningsTotal.inc({ check: warning.check });
  }

  recordPodRefused(reason: string): void {
    this.workerPodsRefusedTotal.inc({ reason });
  }

  recordRetry(node: string): void {
    this.retryAttemptsTotal.inc({ node });
  }

  recordOpened(creationToOpenSeconds: number, profile: string = DEFAULT_PROFILE): void {
    if (creationToOpenSeconds >= 0) this.creationToTaintRemoval.observe({ profile }, creationToOpenSeconds);
  }
}
